# The published image: the base plus the libraries and an entry point, no toolchain.
FROM base
COPY --from=libs /opt/lib /opt/lib
COPY src/hello.sh /opt/bin/hello
RUN chmod +x /opt/bin/hello
CMD ["/opt/bin/hello"]

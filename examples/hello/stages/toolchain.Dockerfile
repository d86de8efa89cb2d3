# A stand-in compiler: turns a source file into an "object" and reports what it compiled.
FROM base
ARG TOOLCHAIN_VERSION
COPY src/cc.sh /usr/local/bin/cc
RUN chmod +x /usr/local/bin/cc && echo "toolchain ${TOOLCHAIN_VERSION}" > /etc/toolchain-release

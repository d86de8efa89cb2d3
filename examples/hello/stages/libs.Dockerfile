# The library stage: compiles each source with the toolchain into /opt/lib.
FROM toolchain
ARG LIBGREET_VERSION
ARG LIB_FLAGS
COPY src/greet.c src/farewell.c /src/
RUN mkdir -p /opt/lib && \
    for f in /src/*.c; do \
      cc ${LIB_FLAGS} -o /opt/lib/$(basename "$f" .c).o "$f"; \
    done && \
    echo "libgreet ${LIBGREET_VERSION}" > /opt/lib/VERSION

# The library stage: compiles each source with the toolchain into /opt/lib, as many at once as
# the job budget kiln offers in the kiln-budget secret (a secret, so the host's budget never
# becomes part of the layer's cache key). The file exports what it sets: the shell the budget
# line starts sees it, as a compiler launcher's `sh -c` would.
FROM toolchain
ARG LIBGREET_VERSION
ARG LIB_FLAGS
COPY src/greet.c src/farewell.c /src/
RUN --mount=type=secret,id=kiln-budget \
    . /run/secrets/kiln-budget && \
    sh -c 'echo "compiling with ${JOBS} job(s) of a ${MEMORY_LIMIT_GB} GB budget"' && \
    mkdir -p /opt/lib && \
    ls /src/*.c | xargs -n 1 -P "${JOBS}" sh -c \
      'cc ${LIB_FLAGS} -o /opt/lib/$(basename "$0" .c).o "$0"' && \
    echo "libgreet ${LIBGREET_VERSION}" > /opt/lib/VERSION

# One library of the chain: its "compile" is a sleep of LIB_SECONDS, then an artifact under
# /opt/lib/<name>. Every library stage builds this file with its own LIB.
FROM base
ARG LIB
ARG LIB_SECONDS
# Its share of the job budget (weight sets ffmpeg's): what a real compile would pass to make -j.
RUN --mount=type=secret,id=kiln-budget . /run/secrets/kiln-budget && \
    echo "${LIB}: ${JOBS} job(s), ${MEMORY_LIMIT_GB} GB" && sleep "${LIB_SECONDS}" && \
    mkdir -p "/opt/lib/${LIB}" && echo "${LIB} built" > "/opt/lib/${LIB}/VERSION"

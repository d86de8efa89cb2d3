# One library of the chain: its "compile" is a sleep of LIB_SECONDS, then an artifact under
# /opt/lib/<name>. Every library stage builds this file with its own LIB.
FROM base
ARG LIB
ARG LIB_SECONDS
RUN sleep "${LIB_SECONDS}" && mkdir -p "/opt/lib/${LIB}" && echo "${LIB} built" > "/opt/lib/${LIB}/VERSION"

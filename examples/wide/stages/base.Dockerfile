# A minimal root filesystem: a static busybox and its applets, nothing from a registry.
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
ARG BASE_RELEASE
RUN mkdir -p /etc /tmp /opt/lib && echo "wide-base ${BASE_RELEASE}" > /etc/wide-release

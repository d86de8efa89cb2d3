# The published image: the base with every library's artifact.
FROM base
COPY --from=zlib /opt/lib/zlib /opt/lib/zlib
COPY --from=png /opt/lib/png /opt/lib/png
COPY --from=ffmpeg /opt/lib/ffmpeg /opt/lib/ffmpeg
COPY --from=opencv /opt/lib/opencv /opt/lib/opencv
COPY --from=gstreamer /opt/lib/gstreamer /opt/lib/gstreamer
COPY --from=tvm /opt/lib/tvm /opt/lib/tvm
CMD ["/bin/sh", "-c", "cat /opt/lib/*/VERSION"]

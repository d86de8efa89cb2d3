# The smoke gate: the final image must run and report every library it ships.
FROM final
RUN /opt/bin/hello --selftest

# The smoke gate: the final image must run and report every library it ships. Its last line,
# `2 passed, 0 failed, 0 skipped`, is the summary the chain's [smoke] floors are held against.
FROM final
RUN /opt/bin/hello --selftest

#!/usr/bin/env node
// Lints every *.Dockerfile of a folder with one npm linter, in this one node process, and
// prints one JSON line: {"tool", "files", "findings", "lint_seconds", "load_seconds"}.
// lint_seconds is the reading and linting alone, after node started and the linter module
// loaded (load_seconds); the caller times the whole process for the comparison with kiln.
//
//   dockerfile-utils: validate(content), default settings, as its language server does.
//   dockerfilelint:   run(configDir, content) per file, as its own CLI calls it (the CLI looks
//                     for a .dockerfilelintrc in each file's folder, and so does this).
//
// Usage: node lint_all.js dockerfile-utils|dockerfilelint DIR
'use strict';

const t0 = process.hrtime.bigint();
const fs = require('fs');
const path = require('path');

const [tool, dir] = process.argv.slice(2);
let lint;
if (tool === 'dockerfile-utils') {
  const { validate } = require('dockerfile-utils');
  lint = (file, content) => validate(content);
} else if (tool === 'dockerfilelint') {
  const dockerfilelint = require('dockerfilelint');
  lint = (file, content) => dockerfilelint.run(path.resolve(path.dirname(file)), content);
} else {
  process.stderr.write('usage: node lint_all.js dockerfile-utils|dockerfilelint DIR\n');
  process.exit(2);
}
const t1 = process.hrtime.bigint();

const files = fs
  .readdirSync(dir)
  .filter((name) => name.endsWith('.Dockerfile'))
  .sort()
  .map((name) => path.join(dir, name));
let findings = 0;
for (const file of files) {
  findings += lint(file, fs.readFileSync(file, 'utf8')).length;
}
const t2 = process.hrtime.bigint();

const seconds = (a, b) => Number(b - a) / 1e9;
process.stdout.write(
  JSON.stringify({
    tool,
    files: files.length,
    findings,
    lint_seconds: seconds(t1, t2),
    load_seconds: seconds(t0, t1),
  }) + '\n'
);

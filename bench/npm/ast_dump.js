#!/usr/bin/env node
// Prints, one JSON line per Dockerfile, what npm's dockerfile-ast makes of it, in the shape of
// kiln's outline_json (src/dockerfile/outline.h), so the two can be compared field by field:
//
//   {"file": ..., "escape": "\\", "error": null,
//    "instructions": [{"keyword", "start", "end", "flags", "form", "args", "heredocs"}]}
//
// dockerfile-ast splits, ranges and classifies; this script only reads its raw text back:
// every argument, JSON string, property name and value is the document text under the range
// dockerfile-ast gives it, with escaped newlines (and the comment or blank lines inside a
// continuation) joined away. Lines are made 1-based. dockerfile-ast never rejects a file, so
// "error" is always null.
//
// Usage: node ast_dump.js FILE_OR_DIR...   (a directory means its *.Dockerfile files, sorted)
//        node ast_dump.js --record FILE|DIR   (the form of tests/fixtures/dockerfile-ast/: a
//                                              file's outline, or a folder's keyed by name)
'use strict';

const fs = require('fs');
const path = require('path');
const { DockerfileParser } = require('dockerfile-ast');

const PAIR_KEYWORDS = new Set(['env', 'label', 'arg']);
const JSON_CLASSES = new Set(['add', 'cmd', 'copy', 'entrypoint', 'run', 'shell', 'volume']);

function listFiles(args) {
  const files = [];
  for (const arg of args) {
    if (fs.statSync(arg).isDirectory()) {
      for (const name of fs.readdirSync(arg).sort()) {
        if (name.endsWith('.Dockerfile')) {
          files.push(path.join(arg, name));
        }
      }
    } else {
      files.push(arg);
    }
  }
  return files;
}

// Escaped newlines removed, with the comment and blank lines a continuation skips.
function joinContinuations(text, escape) {
  const lines = text.split('\n').map((l) => l.replace(/\r$/, ''));
  let out = lines[0];
  for (let i = 1; i < lines.length; i++) {
    const trimmed = out.replace(/[ \t]+$/, '');
    if (trimmed.endsWith(escape)) {
      out = trimmed.slice(0, -1);
    }
    if (/^[ \t]*#/.test(lines[i]) || /^[ \t]*$/.test(lines[i])) {
      continue;
    }
    out += lines[i];
  }
  return out;
}

function outline(content) {
  const dockerfile = DockerfileParser.parse(content);
  const escape = dockerfile.getEscapeCharacter();
  const offsets = [0];
  for (let i = 0; i < content.length; i++) {
    if (content[i] === '\n') {
      offsets.push(i + 1);
    }
  }
  const slice = (range) =>
    joinContinuations(
      content.substring(
        offsets[range.start.line] + range.start.character,
        offsets[range.end.line] + range.end.character
      ),
      escape
    );

  const instructions = dockerfile.getInstructions().map((ins) => {
    const keyword = ins.getKeyword().toLowerCase();
    const range = ins.getRange();
    const out = { keyword, start: range.start.line + 1, end: range.end.line + 1 };
    out.flags = ins.getFlags
      ? ins.getFlags().map((f) => `${f.getName()}=${f.getValue() === null ? '' : f.getValue()}`)
      : [];
    const heredocs = typeof ins.getHeredocs === 'function' ? ins.getHeredocs() : [];
    // Arguments on heredoc body lines are not arguments of the instruction.
    let bodyLine = Infinity;
    if (heredocs.length > 0) {
      const first = heredocs[0];
      const body = first.getContentRange() || first.getDelimiterRange();
      if (body) {
        bodyLine = body.start.line;
      }
    }
    if (PAIR_KEYWORDS.has(keyword)) {
      out.form = 'pairs';
      out.args = [];
      for (const p of ins.getProperties()) {
        out.args.push(slice(p.getNameRange()));
        const valueRange = p.getValueRange();
        if (valueRange) {
          out.args.push(slice(valueRange));
        } else {
          out.args.push(p.getAssignmentOperator() !== null || keyword !== 'arg' ? '' : null);
        }
      }
    } else if (
      JSON_CLASSES.has(keyword) &&
      ins.getOpeningBracket &&
      ins.getOpeningBracket() !== null &&
      ins.getClosingBracket() !== null
    ) {
      out.form = 'json';
      out.args = ins.getJSONStrings().map((s) => {
        try {
          return JSON.parse(slice(s.getRange()));
        } catch (e) {
          return s.getJSONValue();
        }
      });
    } else {
      out.form = 'words';
      out.args = [];
      for (const a of ins.getArguments()) {
        if (a.getRange().start.line >= bodyLine) {
          break;
        }
        out.args.push(...slice(a.getRange()).split(/[ \t\r\n\v\f]+/).filter((w) => w !== ''));
      }
    }
    out.heredocs = heredocs.map((h) => h.getName());
    return out;
  });
  return { escape, error: null, instructions };
}

// One instruction a line: the recorded fixtures stay short and diff well.
function formatOutline(view, indent) {
  const head = `{"escape": ${JSON.stringify(view.escape)}, "error": ${JSON.stringify(view.error)}, `;
  if (view.instructions.length === 0) {
    return `${head}"instructions": []}`;
  }
  const body = view.instructions.map((i) => `${indent}  ${JSON.stringify(i)}`).join(',\n');
  return `${head}"instructions": [\n${body}\n${indent}]}`;
}

function main() {
  const args = process.argv.slice(2);
  if (args[0] === '--record') {
    // The fixture form: one outline, or with several files one object keyed by file name.
    const files = listFiles(args.slice(1));
    const views = files.map((file) => outline(fs.readFileSync(file, 'utf8')));
    if (files.length === 1 && !fs.statSync(args[1]).isDirectory()) {
      process.stdout.write(formatOutline(views[0], '') + '\n');
      return;
    }
    const entries = files.map(
      (file, i) => `  ${JSON.stringify(path.basename(file, '.Dockerfile'))}: ${formatOutline(views[i], '  ')}`
    );
    process.stdout.write(`{\n${entries.join(',\n')}\n}\n`);
    return;
  }
  const out = [];
  for (const file of listFiles(args)) {
    const view = outline(fs.readFileSync(file, 'utf8'));
    out.push(JSON.stringify({ file, ...view }));
  }
  process.stdout.write(out.join('\n') + (out.length ? '\n' : ''));
}

main();

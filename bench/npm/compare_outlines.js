#!/usr/bin/env node
// Compares kiln's outlines (kiln_bench_dockerfile_dump) with dockerfile-ast's (ast_dump.js),
// both JSON lines keyed by "file", and prints the differences grouped by class with counts
// and the first examples of each.
//
// Instructions are paired by start line. A class is the field that differs and the keyword:
// "args:arg", "end:run", "form:cmd", "flags:copy", "heredocs:run", "keyword", "escape", plus
// "kiln-rejects" (kiln, like BuildKit, refuses the file; dockerfile-ast never refuses one),
// "only-kiln:KW" and "only-ast:KW" for instructions one side has and the other has not.
//
// Usage: node compare_outlines.js KILN.jsonl AST.jsonl [EXAMPLES_PER_CLASS]
//        node compare_outlines.js --patches KILN.jsonl AST.jsonl   (per differing file, the JSON
//        patch from dockerfile-ast's outline to kiln's: a start for differences.json entries)
'use strict';

const fs = require('fs');
const path = require('path');

function load(file) {
  const out = new Map();
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (line.trim() !== '') {
      const view = JSON.parse(line);
      out.set(path.resolve(view.file), view);
    }
  }
  return out;
}

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

function compareFile(kiln, ast, report) {
  if (kiln.error !== null) {
    report('kiln-rejects', { line: kiln.error.line, kiln: kiln.error.message, ast: 'accepted' });
    return;
  }
  if (kiln.escape !== ast.escape) {
    report('escape', { line: 1, kiln: kiln.escape, ast: ast.escape });
  }
  const byLine = new Map(ast.instructions.map((i) => [i.start, i]));
  const kilnLines = new Set(kiln.instructions.map((i) => i.start));
  for (const k of kiln.instructions) {
    const a = byLine.get(k.start);
    if (!a) {
      report(`only-kiln:${k.keyword}`, { line: k.start, kiln: k, ast: null });
      continue;
    }
    if (k.keyword !== a.keyword) {
      report('keyword', { line: k.start, kiln: k.keyword, ast: a.keyword });
      continue;
    }
    for (const field of ['end', 'flags', 'form', 'args', 'heredocs']) {
      if (!same(k[field], a[field])) {
        report(`${field}:${k.keyword}`, { line: k.start, kiln: k[field], ast: a[field] });
      }
    }
  }
  for (const a of ast.instructions) {
    if (!kilnLines.has(a.start)) {
      report(`only-ast:${a.keyword}`, { line: a.start, kiln: null, ast: a });
    }
  }
}

// RFC 6902 operations that turn dockerfile-ast's outline into kiln's, instructions paired by
// start line and keyword: the unpaired ones of dockerfile-ast removed, kiln's own added in
// place, then the fields that differ replaced; a "test" before each removal and replacement
// pins what dockerfile-ast said there. The form of differences.json in
// tests/fixtures/dockerfile-ast/.
function patchOps(ast, kiln) {
  if (kiln.error !== null) {
    return [
      { op: 'test', path: '/error', value: ast.error },
      { op: 'replace', path: '/escape', value: kiln.escape },
      { op: 'replace', path: '/error', value: kiln.error },
      { op: 'replace', path: '/instructions', value: [] },
    ];
  }
  const ops = [];
  if (kiln.escape !== ast.escape) {
    ops.push({ op: 'test', path: '/escape', value: ast.escape });
    ops.push({ op: 'replace', path: '/escape', value: kiln.escape });
  }
  const a = ast.instructions;
  const k = kiln.instructions;
  const key = (i) => `${i.start}:${i.keyword}`;
  const kilnKeys = new Set(k.map(key));
  const astKeys = new Set(a.map(key));
  for (let j = a.length - 1; j >= 0; j--) {
    if (!kilnKeys.has(key(a[j]))) {
      ops.push({ op: 'test', path: `/instructions/${j}`, value: a[j] });
      ops.push({ op: 'remove', path: `/instructions/${j}` });
    }
  }
  const paired = new Map(a.filter((i) => kilnKeys.has(key(i))).map((i) => [key(i), i]));
  k.forEach((ins, j) => {
    if (!astKeys.has(key(ins))) {
      const { keyword, start, end, flags, form, args, heredocs } = ins;
      const value = { keyword, start, end, flags, form, args, heredocs };
      ops.push({ op: 'add', path: `/instructions/${j}`, value });
    }
  });
  k.forEach((ins, j) => {
    const other = paired.get(key(ins));
    for (const field of other ? ['end', 'flags', 'form', 'args', 'heredocs'] : []) {
      if (!same(other[field], ins[field])) {
        ops.push({ op: 'test', path: `/instructions/${j}/${field}`, value: other[field] });
        ops.push({ op: 'replace', path: `/instructions/${j}/${field}`, value: ins[field] });
      }
    }
  });
  return ops;
}

function printPatches(kiln, ast) {
  const entries = [];
  for (const [file, k] of kiln) {
    const ops = patchOps(ast.get(file), k);
    if (ops.length > 0) {
      const lines = ops.map((op) => `    ${JSON.stringify(op)}`).join(',\n');
      entries.push(`  ${JSON.stringify(path.basename(file, '.Dockerfile'))}: [\n${lines}\n  ]`);
    }
  }
  console.log(`{\n${entries.join(',\n')}\n}`);
}

function main() {
  if (process.argv[2] === '--patches') {
    printPatches(load(process.argv[3]), load(process.argv[4]));
    return;
  }
  const [kilnFile, astFile, perClass] = process.argv.slice(2);
  const examples = Number(perClass || 2);
  const kiln = load(kilnFile);
  const ast = load(astFile);
  const classes = new Map();
  let differing = 0;
  let instructions = 0;
  for (const [file, k] of kiln) {
    const a = ast.get(file);
    if (!a) {
      throw new Error(`no dockerfile-ast outline for ${file}`);
    }
    instructions += k.instructions.length;
    const seen = new Set();
    compareFile(k, a, (cls, detail) => {
      let entry = classes.get(cls);
      if (!entry) {
        entry = { count: 0, files: 0, examples: [] };
        classes.set(cls, entry);
      }
      entry.count++;
      if (!seen.has(cls)) {
        seen.add(cls);
        entry.files++;
      }
      if (entry.examples.length < examples) {
        entry.examples.push({ file, ...detail });
      }
    });
    if (seen.size > 0) {
      differing++;
    }
  }
  console.log(
    `${kiln.size} files, ${instructions} kiln instructions; ` +
      `${kiln.size - differing} files agree in full, ${differing} differ`
  );
  const sorted = [...classes].sort((x, y) => y[1].count - x[1].count || (x[0] < y[0] ? -1 : 1));
  if (sorted.length > 0) {
    console.log(`${'class'.padEnd(24)} ${'count'.padStart(7)} ${'files'.padStart(7)}`);
  }
  for (const [cls, entry] of sorted) {
    console.log(`${cls.padEnd(24)} ${String(entry.count).padStart(7)} ${String(entry.files).padStart(7)}`);
  }
  for (const [cls, entry] of sorted) {
    for (const e of entry.examples) {
      console.log(`  ${cls} ${e.file}:${e.line}`);
      console.log(`    kiln: ${JSON.stringify(e.kiln)}`);
      console.log(`    ast:  ${JSON.stringify(e.ast)}`);
    }
  }
}

main();

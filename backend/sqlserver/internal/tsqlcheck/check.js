#!/usr/bin/env node
// check.js parses T-SQL batches with the TSqlParser of the ANTLR grammars-v4
// project (packaged as antlr4ts-sql) and reports every syntax error.
//
// Input (stdin):  JSON [{"name": "...", "sql": "..."}, ...]
// Output (stdout): JSON [{"name": "...", "errors": ["line:col message", ...]}, ...]
// in the same order. Exit status 0 when the input was read and parsed (with
// or without syntax errors), 2 when the input itself is unusable.
'use strict';

// The package's index loads antlr4ts's modules in the order they need (a
// direct require of 'antlr4ts' first fails on a circular import).
const {
  BailErrorStrategy, CharStreams, CommonTokenStream, CaseChangingStream, ParseCancellationException,
  PredictionMode, TSqlLexer, TSQLGrammar,
} = require('antlr4ts-sql');

const { TSqlParser } = TSQLGrammar;

// collector records syntax errors instead of printing them, each with the
// source line it is on and a caret under the column, because the parser's
// own message quotes upper-cased token text that can be empty.
function collector(errors, where, lines) {
  return {
    syntaxError(_recognizer, _symbol, line, col, msg) {
      const text = lines[line - 1] || '';
      // "expecting {...}" can list hundreds of keywords.
      if (msg.length > 240) msg = `${msg.slice(0, 240)}...}`;
      errors.push(`${where} ${line}:${col} ${msg}\n    ${text}\n    ${' '.repeat(col)}^`);
    },
  };
}

// check parses sql in two stages, the usual ANTLR speed-up: first with SLL
// prediction and an error strategy that gives up at the first error (fast,
// and exact for inputs that parse), then, only if that failed, again with
// full LL prediction and normal error reporting, which alone decides.
function check(sql) {
  const errors = [];
  const lines = sql.split('\n');
  const make = () => {
    // The T-SQL lexer expects upper-case input: keywords are case-insensitive.
    const lexer = new TSqlLexer(new CaseChangingStream(CharStreams.fromString(sql), true));
    lexer.removeErrorListeners();
    lexer.addErrorListener(collector(errors, 'lexer', lines));
    const parser = new TSqlParser(new CommonTokenStream(lexer));
    parser.removeErrorListeners();
    return parser;
  };
  const fast = make();
  fast.interpreter.setPredictionMode(PredictionMode.SLL);
  fast.errorHandler = new BailErrorStrategy();
  try {
    fast.tsql_file(); // ends with EOF, so trailing garbage is an error too
    if (errors.length === 0) return errors;
  } catch (e) {
    if (!(e instanceof ParseCancellationException)) throw e;
  }
  errors.length = 0;
  const full = make();
  full.addErrorListener(collector(errors, 'parser', lines));
  full.interpreter.setPredictionMode(PredictionMode.LL);
  full.tsql_file();
  return errors;
}

function main() {
  let input = '';
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (d) => { input += d; });
  process.stdin.on('end', () => {
    let batches;
    try {
      batches = JSON.parse(input);
      if (!Array.isArray(batches)) throw new Error('input is not a JSON array');
    } catch (e) {
      process.stderr.write(`tsqlcheck: ${e.message}\n`);
      process.exit(2);
    }
    const out = batches.map((b) => ({ name: String(b.name), errors: check(String(b.sql)) }));
    process.stdout.write(JSON.stringify(out));
  });
}

main();

#!/usr/bin/env node

// Plain JavaScript on purpose: this check must run before any dependency that needs Node 24 loads.
const major = Number(process.versions.node.split('.')[0]);
if (major < 24) {
  process.stderr.write(
    `flink-jar-gateway needs Node.js 24 or newer, but this is ${process.version}; run it through npm (npm start uses the Node 24 from node_modules) or put Node 24 first on PATH.\n`,
  );
  process.exit(1);
}
const { main } = require('../dist/src/main.js');
main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  () => process.exit(1),
);

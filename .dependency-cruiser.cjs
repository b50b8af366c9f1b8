/**
 * The layering of ARCHITECTURE.md, kept by `npm run lint`: each layer imports only from the layers
 * below it, and no import circle exists, type-only imports included. A rule here changes with
 * ARCHITECTURE.md, never to let one import through.
 */
const FOUNDATION = ['^src/(errors|config|net)/', '^src/(atomic-file|clock|logging|metrics|private-dir|project-root|stream-room|v8-tuning)\\.ts$'];
const PLUGIN_KIT = ['^src/plugin-kit/'];
const DOWNLOAD = ['^src/download/'];

/** Each layer and what it may import besides itself (node: built-ins and npm packages are not checked here). */
const LAYERS = [
  { name: 'foundation', path: FOUNDATION, may: [] },
  // The plugin kit's facade (index.ts) also re-exports the download engine's HTTP client for plugins.
  { name: 'plugin-kit', path: ['^src/plugin-kit/(?!index\\.ts$)'], may: [...FOUNDATION] },
  { name: 'plugin-kit facade', path: ['^src/plugin-kit/index\\.ts$'], may: [...FOUNDATION, ...PLUGIN_KIT, ...DOWNLOAD] },
  { name: 'download', path: DOWNLOAD, may: [...FOUNDATION, '^src/plugin-kit/(?!index\\.ts$)'] },
  { name: 'audit', path: ['^src/audit/'], may: [...FOUNDATION] },
  { name: 'artifacts', path: ['^src/artifacts/'], may: [...FOUNDATION, ...PLUGIN_KIT, ...DOWNLOAD, '^src/audit/'] },
  { name: 'tokens', path: ['^src/tokens/'], may: [...FOUNDATION, ...PLUGIN_KIT] },
  { name: 'cluster', path: ['^src/cluster/'], may: [...FOUNDATION, ...DOWNLOAD] },
  { name: 'submission', path: ['^src/submission/'], may: [...FOUNDATION, ...PLUGIN_KIT, ...DOWNLOAD, '^src/(audit|artifacts|tokens|cluster)/'] },
  { name: 'ha', path: ['^src/ha/'], may: [...FOUNDATION, ...PLUGIN_KIT, '^src/(audit|tokens|cluster|submission)/'] },
  { name: 'http', path: ['^src/http/'], may: [...FOUNDATION, ...PLUGIN_KIT, ...DOWNLOAD, '^src/(audit|artifacts|tokens|cluster|submission)/'] },
];

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'An import circle (type-only imports count): move the shared piece down a layer.',
      from: {},
      to: { circular: true },
    },
    ...LAYERS.map((layer) => ({
      name: `layer-${layer.name.replace(/ /g, '-')}`,
      severity: 'error',
      comment: `${layer.name} imports only from the layers ARCHITECTURE.md puts below it.`,
      from: { path: layer.path },
      to: { path: '^src/', pathNot: [...layer.path, ...layer.may] },
    })),
    {
      name: 'layer-below-composition',
      severity: 'error',
      comment: 'Only the composition root and main.ts wire the built-in plugins and the features together.',
      from: { path: '^src/', pathNot: '^src/(composition|main)\\.ts$' },
      to: { path: ['^src/(composition|main)\\.ts$', '^fs-plugins/'] },
    },
    {
      name: 'fs-plugins-use-the-kit',
      severity: 'error',
      comment: 'A plugin imports from the gateway only src/plugin-kit (fs-plugins/README.md).',
      // fs-plugins/index.ts is the built-in list the composition root loads, not a plugin.
      from: { path: '^fs-plugins/', pathNot: '^fs-plugins/index\\.ts$' },
      to: { path: '^src/', pathNot: '^src/plugin-kit/index\\.ts$' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // Type-only imports are edges too: a type-only circle is still a circle.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    exclude: { path: '(^|/)node_modules/' },
  },
};

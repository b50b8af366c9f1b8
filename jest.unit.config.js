// The fast lane alone (`npm run test:unit` runs `jest --selectProjects fast`): jest.config.js's `fast`
// project, kept for `npx jest -c jest.unit.config.js <files>`. The lanes are defined there.
const base = require('./jest.config.js');

/** @type {import('jest').Config} */
module.exports = { ...base, projects: base.projects.filter((p) => p.displayName === 'fast') };

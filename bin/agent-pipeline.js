#!/usr/bin/env node
// The published entry point: the compiled client (built by `npm run build`, which `npm ci` runs via `prepare`).
import '../dist/client.js';

// The TSV toolkit in one import: line splitting (lines.ts), file writers (writers.ts),
// FIFOs (fifos.ts) and temporary files (temps.ts).
export * from './lines.js';
export * from './writers.js';
export * from './fifos.js';
export * from './temps.js';

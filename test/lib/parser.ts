// The runtime's WHATWG URL parser (ada inside Node.js), for tests that pin one of its
// answers: such a test names the parser it holds for, and holds an answer per parser
// where they differ (ada 2: Node 20 and 22; ada 4: Node 24 and 26).

/** The running parser, as tests name it: `ada 4.0.0 (Node v24.21.0)`. */
export const PARSER = `ada ${process.versions.ada ?? '?'} (Node ${process.version})`;

/** The major version of the running ada, as the keys of byParser name it. */
export const ADA_MAJOR = Number((process.versions.ada ?? '0').split('.')[0]);

/**
 * The answer of the running parser among `answers` (keyed by ada major version); throws,
 * naming the parsers the test holds for, under a parser it does not know.
 */
export function byParser<T>(answers: Record<number, T>): T {
  if (ADA_MAJOR in answers) return answers[ADA_MAJOR]!;
  throw new Error(`this test pins answers of ada ${Object.keys(answers).join(', ')} only; the runtime has ${PARSER}`);
}

// A worker thread of analyze-dump: runs the pure core over batches of reflog lines
// and hands back the packed records (transferred, not copied) with the batch's counts.
import '../cli/runtime.js'; // first: started alone on an unsupported Node.js, it says so
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import { loadUrlHash } from '../core/url.js';
import { BatchAnalyzer, lentBuffers, type AnalyzeDone, type AnalyzeDumpOptions, type AnalyzeJob } from './analyze-dump-batch.js';

if (isMainThread) {
  process.stderr.write('analyze-dump-worker: a worker thread of analyze-dump, which starts it: run bin/analyze-dump\n');
  process.exit(2);
}
const { opts, maxLine } = workerData as { opts: AnalyzeDumpOptions; maxLine: number };
// One analyzer for the thread's life: its memory of recent URLs spans batches.
const analyzer = new BatchAnalyzer(opts, await loadUrlHash(), maxLine);

// Every buffer goes back and forth (transferred, never copied or left to the garbage
// collector): the input batch returns to the main thread, and the main thread lends
// the buffers of records and rejects it has taken in for the next batch's.
parentPort!.on('message', ({ batch, reuse }: AnalyzeJob) => {
  const buf = Buffer.from(batch.buffer, batch.byteOffset, batch.byteLength);
  const { result, packed } = analyzer.run(buf, reuse);
  const done: AnalyzeDone = { result, packed, batch };
  parentPort!.postMessage(done, [...lentBuffers({ packed, rejects: result.rejects }), batch.buffer as ArrayBuffer]);
});

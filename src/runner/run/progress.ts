// The progress of a run, from what it can see: the reflog's offset in the descriptor
// the chain reads, and the progress lines each stage logs (cli/stage.ts) as its stderr
// goes by; before the chain, the re-key's counts. Logged at info every 10 s, and drawn
// on a terminal (cli/progress.ts).
import { Progress, type ProgressNow, countText, percentOf, progressEveryMs, sizeText } from '../../cli/progress.js';
import type { Say } from '../say.js';

/** What one stage said of itself so far. */
interface StageSeen {
  name: string;
  /** Its last progress line's fields, or its summary's. */
  counts: Record<string, unknown>;
  done: boolean;
  /** New domains upload-domains announced it commits, until it says it did. */
  committing: number | null;
  /** The start of a line not yet whole. */
  partial: string;
}

/** What the re-key is at: which file, and how many of its URLs it took (or wrote). */
export interface RekeyAt {
  file: string;
  step: 'reading' | 'writing';
  urls: number;
}

/** The stages' environment for their progress lines: twice as often as the runner's, so each of its lines has a fresh count. */
export function stageProgressEnv(): Record<string, string> {
  return { MASTER_SERVER_PROGRESS_MS: String(Math.max(1, Math.floor(progressEveryMs() / 2))) };
}

/** A stage's count of records (or lines) taken in so far, as its counts name it. */
function countIn(c: Record<string, unknown>): number | null {
  for (const k of ['lines_in', 'records_in', 'incoming']) if (typeof c[k] === 'number') return c[k] as number;
  return null;
}

/** The progress of one run named `run`: fed by the chain, asked by the timer. */
export class RunProgress {
  /** The reflog's size, and how far the chain has read it (-1: unknown). */
  size = 0;
  read: () => number = () => -1;
  rekey: RekeyAt | null = null;
  /** The commit's step under way, once the chain is over. */
  step: string | null = null;
  private stages: StageSeen[] = [];
  private readonly progress: Progress;

  /** `terminal: false`: no terminal line (the commit's, whose warnings and summary go to stderr too). */
  constructor(
    private readonly run: string,
    say: Say,
    opts: { terminal?: boolean; since?: number } = {},
  ) {
    this.progress = new Progress({ log: say.log, ...opts }, () => this.now());
  }

  /** Starts the timer (logging and drawing); returns this. */
  start(): this {
    this.progress.start();
    return this;
  }

  /** Logs and draws what is due (synchronous work calls it once per batch). */
  tick(): void {
    this.progress.tick();
  }

  stop(): void {
    this.progress.stop();
  }

  /** Clears the terminal line, before a message to the operator. */
  clear(): void {
    this.progress.clear();
  }

  /** The chain's stages, in order, before any says something. */
  chain(names: readonly string[]): void {
    this.rekey = null;
    this.stages = names.map((name) => ({ name, counts: {}, done: false, committing: null, partial: '' }));
  }

  /** Takes what stage `i` wrote on stderr: its progress lines, its commit, its summary. */
  feed(i: number, chunk: Buffer): void {
    const s = this.stages[i];
    if (s === undefined) return;
    const lines = (s.partial + chunk.toString('utf8')).split('\n');
    s.partial = lines.pop()!.slice(-(1 << 16));
    for (const l of lines) {
      if (!l.startsWith('{') || !/"(progress|summary|committing|assigned_by_us)"/.test(l)) continue;
      let o: Record<string, unknown>;
      try {
        o = JSON.parse(l) as Record<string, unknown>;
      } catch {
        continue;
      }
      if (o.summary === true) {
        s.counts = o;
        s.done = true;
      } else if (o.progress !== null && typeof o.progress === 'object') s.counts = o.progress as Record<string, unknown>;
      if (typeof o.committing === 'number') s.committing = o.committing;
      if (typeof o.assigned_by_us === 'number') s.committing = null;
    }
  }

  /** Where the run is: the fields of its log line and the terminal's text. */
  now(): ProgressNow {
    if (this.step !== null) return { fields: { run: this.run, stage: 'commit', step: this.step }, text: `${this.run}: committing (${this.step})` };
    if (this.rekey !== null) {
      const r = this.rekey;
      return {
        fields: { run: this.run, stage: 'rekey', file: r.file, step: r.step, urls: r.urls },
        text: `${this.run}: re-keying ${r.file}: ${countText(r.urls)} URLs ${r.step === 'reading' ? 'read' : 'written'}`,
      };
    }
    const at = this.read();
    const ad = this.stages[0];
    const lines = ad === undefined ? null : countIn(ad.counts);
    const fields: Record<string, unknown> = { run: this.run, stage: null, lines_read: lines, bytes_read: at < 0 ? null : at, bytes: this.size };
    fields.read_percent = at < 0 ? null : percentOf(at, this.size);
    const current = this.stages.find((s) => !s.done);
    if (current === undefined) return { fields, text: `${this.run}: ${this.stages.length === 0 ? 'starting' : 'chain done'}` };
    const phase = this.phaseOf(current, at);
    fields.stage = current.name;
    fields.phase = phase;
    fields.stages = Object.fromEntries(this.stages.map((s) => [s.name, countIn(s.counts)]));
    return { fields, text: `${this.run}: ${this.textOf(current, phase, at, lines)}` };
  }

  /** What the stage holding the chain back is doing. */
  private phaseOf(s: StageSeen, at: number): string {
    if (s.committing !== null) return 'committing';
    if (s !== this.stages[0]) return 'running';
    if (at >= 0 && at < this.size) return 'reading';
    return Number(s.counts.bytes_out ?? 0) > 0 ? 'writing' : 'sorting';
  }

  /** The terminal's words for where the run is. */
  private textOf(s: StageSeen, phase: string, at: number, lines: number | null): string {
    const read = `${lines === null ? '' : `${countText(lines)} lines, `}${at < 0 ? '' : `${sizeText(at)} of `}${sizeText(this.size)}`;
    if (phase === 'reading') return `analyze-dump: ${read} (${percentOf(at, this.size)}%)`;
    if (phase === 'committing') return `upload-domains: committing ${countText(s.committing!)} new domains`;
    const after = this.stages
      .slice(this.stages.indexOf(s) + 1)
      .map((t) => `${t.name} ${countText(countIn(t.counts) ?? 0)}`)
      .join(', ');
    const head = s === this.stages[0] ? `analyze-dump ${phase} (read ${read})` : `${s.name} ${countText(countIn(s.counts) ?? 0)}`;
    return after === '' ? head : `${head}; ${after}`;
  }
}

// The progress of a run, for the terminal display.

/**
 * Progress of the reflog read, for the terminal display: its size, and how far the
 * chain has read it (the offset of the open file the chain reads, or -1 unknown).
 */
export interface Progress {
  size: number;
  read: () => number;
}

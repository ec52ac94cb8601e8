// The defaults a stage and the runner share: the runner passes a stage no flag for
// them, and stores them with the state as the stage applies them.

/** filter-url --keep when not given: how long a URL that did not come again stays in current_log. */
export const DEFAULT_KEEP = '1h';
/** filter-url --resend-after when not given. */
export const DEFAULT_RESEND_AFTER = '1h';
/** limit-domains --carry-keep when not given: how long a URL may wait in the carry. */
export const DEFAULT_CARRY_KEEP = '10h';

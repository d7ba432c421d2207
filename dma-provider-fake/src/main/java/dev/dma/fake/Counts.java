package dev.dma.fake;

import org.jspecify.annotations.Nullable;

/**
 * The mutable tallies behind {@link FakeCounters}: one per endpoint, each feeding its fabric's.
 * Guarded by the fabric's lock, like everything else an endpoint mutates.
 */
final class Counts {
  static final int POST_ATTEMPTS = 0;
  static final int POSTS = 1;
  static final int WRITES = 2;
  static final int READS = 3;
  static final int AGAIN_ANSWERS = 4;
  static final int POST_ERRORS = 5;
  static final int COMPLETIONS = 6;
  static final int ERROR_COMPLETIONS = 7;
  static final int CQ_READ_FAILURES = 8;
  static final int REGISTRATIONS = 9;
  static final int REGISTRATION_FAILURES = 10;
  static final int DEREGISTRATIONS = 11;
  static final int LIVE_REGISTRATIONS = 12;
  static final int REGISTRATIONS_OPEN_AT_CLOSE = 13;
  static final int EXPOSES = 14;
  static final int LIVE_EXPOSES = 15;
  static final int INSERTS = 16;
  static final int INSERT_FAILURES = 17;
  static final int REMOVES = 18;
  static final int REMOVES_WITH_OPS_OUTSTANDING = 19;
  static final int FLUSHED_OPS = 20;
  static final int VIOLATIONS = 21;
  static final int BYTES_WRITTEN = 22;
  static final int BYTES_READ = 23;
  static final int OPS_IN_FLIGHT_AT_CLOSE = 24;
  static final int ENDPOINTS_OPENED = 25;
  static final int PROGRESS_CALLS = 26;
  static final int RESETS = 27;
  static final int OPS_DISCARDED_BY_RESET = 28;
  static final int PEER_PROBES = 29;
  private static final int COUNT = 30;

  private final @Nullable Counts parent;
  private final long[] values = new long[COUNT];
  private String lastViolation = "";

  /**
   * Tallies that also feed {@code parent}.
   *
   * @param parent the fabric's tallies, or {@code null} for the fabric's own
   */
  Counts(@Nullable Counts parent) {
    this.parent = parent;
  }

  void add(int counter, long delta) {
    values[counter] += delta;
    if (parent != null) {
      parent.values[counter] += delta;
    }
  }

  void increment(int counter) {
    add(counter, 1);
  }

  void violation(String description) {
    increment(VIOLATIONS);
    lastViolation = description;
    if (parent != null) {
      parent.lastViolation = description;
    }
  }

  FakeCounters snapshot() {
    long[] v = values;
    return new FakeCounters(
        v[POST_ATTEMPTS],
        v[POSTS],
        v[WRITES],
        v[READS],
        v[AGAIN_ANSWERS],
        v[POST_ERRORS],
        v[COMPLETIONS],
        v[ERROR_COMPLETIONS],
        v[CQ_READ_FAILURES],
        v[REGISTRATIONS],
        v[REGISTRATION_FAILURES],
        v[DEREGISTRATIONS],
        v[LIVE_REGISTRATIONS],
        v[REGISTRATIONS_OPEN_AT_CLOSE],
        v[EXPOSES],
        v[LIVE_EXPOSES],
        v[INSERTS],
        v[INSERT_FAILURES],
        v[REMOVES],
        v[REMOVES_WITH_OPS_OUTSTANDING],
        v[FLUSHED_OPS],
        v[VIOLATIONS],
        v[BYTES_WRITTEN],
        v[BYTES_READ],
        v[OPS_IN_FLIGHT_AT_CLOSE],
        v[ENDPOINTS_OPENED],
        v[PROGRESS_CALLS],
        v[RESETS],
        v[OPS_DISCARDED_BY_RESET],
        v[PEER_PROBES],
        lastViolation);
  }
}

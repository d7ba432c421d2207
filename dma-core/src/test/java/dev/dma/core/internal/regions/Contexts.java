package dev.dma.core.internal.regions;

import dev.dma.api.CacheableSpan;
import dev.dma.api.Operands;

/** Caller contexts for the registration-cache tests. */
final class Contexts {
  private Contexts() {}

  /** A context that must not be asked for a span: a cache hit never asks. */
  static final Operands NEVER_ASKED =
      new Operands() {
        @Override
        public CacheableSpan cacheableSpan() {
          throw new AssertionError("cacheableSpan() was called on a cache hit");
        }
      };

  /** A context with no span: register the operand for this transfer only. */
  static final Operands NO_SPAN = new Operands() {};

  /** A context answering a span, counting how often it was asked. */
  static final class WithSpan implements Operands {
    final CacheableSpan span;
    int asked;

    WithSpan(long base, long end) {
      this.span = new CacheableSpan(base, end);
    }

    @Override
    public CacheableSpan cacheableSpan() {
      asked++;
      return span;
    }
  }

  static WithSpan span(long base, long end) {
    return new WithSpan(base, end);
  }
}

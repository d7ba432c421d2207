package dev.dma.fake;

import dev.dma.spi.CompletionSink;
import java.util.ArrayList;
import java.util.List;

/** A completion sink that records what it was given, in order; one thread at a time. */
final class RecordingSink implements CompletionSink {
  /** One delivered completion; errno 0 for success. */
  record Entry(int slot, int errno, int providerErrno, String message) {}

  final List<Entry> entries = new ArrayList<>();

  @Override
  public void completed(int slot) {
    entries.add(new Entry(slot, 0, 0, null));
  }

  @Override
  public void failed(int slot, int errno, int providerErrno, String message) {
    entries.add(new Entry(slot, errno, providerErrno, message));
  }

  List<Integer> slots() {
    return entries.stream().map(Entry::slot).toList();
  }

  Entry only() {
    if (entries.size() != 1) {
      throw new AssertionError("expected one completion, got " + entries);
    }
    return entries.getFirst();
  }

  void clear() {
    entries.clear();
  }
}

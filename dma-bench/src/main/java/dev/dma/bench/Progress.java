package dev.dma.bench;

import java.io.PrintWriter;

/**
 * The live progress line: redrawn in place on a terminal, one plain line per finished point
 * otherwise (logs and CI keep the record without carriage returns). Written to the error stream so
 * {@code --csv} and {@code --json} on standard output stay clean.
 */
final class Progress {
  private final PrintWriter err;
  private final boolean terminal;
  private final boolean enabled;
  private boolean drawn;

  Progress(PrintWriter err, boolean terminal, boolean enabled) {
    this.err = err;
    this.terminal = terminal;
    this.enabled = enabled;
  }

  /** Whether standard output and input are a terminal (JDK 22+ tells us exactly). */
  static boolean onTerminal() {
    java.io.Console console = System.console();
    return console != null && console.isTerminal();
  }

  /** Redraws the live line (terminals only). */
  void update(String line) {
    if (enabled && terminal) {
      err.print("\r" + line + "\033[K");
      err.flush();
      drawn = true;
    }
  }

  /** Finishes a point: a plain line when not on a terminal, the cleared line otherwise. */
  void done(String line) {
    if (!enabled) {
      return;
    }
    if (terminal) {
      err.print("\r" + line + "\033[K\n");
      drawn = false;
    } else {
      err.println(line);
    }
    err.flush();
  }

  /** Says something on its own line, clearing a live line first. */
  void note(String line) {
    if (drawn) {
      err.print("\r\033[K");
      drawn = false;
    }
    err.println(line);
    err.flush();
  }
}

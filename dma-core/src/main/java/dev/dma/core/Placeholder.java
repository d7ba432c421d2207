package dev.dma.core;

/** Stand-in until the service lands (this commit lays the SPI only). */
final class Placeholder {
  private Placeholder() {}
}

package dev.dma.core;

import java.time.Duration;

/**
 * One device's health in a {@link FabricServiceGroup}, as {@link FabricServiceGroup#health()} reads
 * it: a snapshot, each count a relaxed reading of its own.
 *
 * @param device the device (domain) name
 * @param state whether the group sends it new transfers
 * @param faults failures the group counted against the device itself (provider errors, deadlines
 *     and resets, see the group's "Health" section), since start
 * @param pauses how many times the device was paused
 * @param probes transfers sent to it as probes while paused
 * @param failedOver transfers that failed here and were posted again on another device
 * @param cooldown how long the group waits, once the device is paused, before its next probe
 */
public record DeviceHealth(
    String device,
    State state,
    long faults,
    long pauses,
    long probes,
    long failedOver,
    Duration cooldown) {

  /** Whether a device gets new transfers. */
  public enum State {
    /** It gets its share of transfers and striped chunks. */
    HEALTHY,
    /**
     * Judged at fault: it gets no new transfers while another device is healthy, only a probe once
     * its cooldown has passed.
     */
    PAUSED
  }
}

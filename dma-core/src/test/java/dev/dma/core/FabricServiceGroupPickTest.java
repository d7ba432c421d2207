package dev.dma.core;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/** The group's choice between two devices, without any device. */
class FabricServiceGroupPickTest {
  @Test
  void pickPrefersARunningThenTheLessLoadedDevice() {
    assertEquals(1, FabricServiceGroup.pick(0, true, 5, 1, true, 4));
    assertEquals(0, FabricServiceGroup.pick(0, true, 4, 1, true, 4), "ties keep the first");
    assertEquals(0, FabricServiceGroup.pick(0, true, 100, 1, false, 0));
    assertEquals(1, FabricServiceGroup.pick(0, false, 0, 1, true, 100));
  }
}

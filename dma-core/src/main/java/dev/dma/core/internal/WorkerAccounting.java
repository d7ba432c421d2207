package dev.dma.core.internal;

import dev.dma.api.Operands;
import java.util.IdentityHashMap;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * The worker's accounting of its slots: the in-flight cap it starts with ({@link #inFlightCap}),
 * and the check, from outside its passes, that it stays consistent: the free slots plus the
 * occupied ones are the cap, and equal the in-flight count; every op held (posted, queued or
 * deferred) is counted on its client, whose count is positive and which is the one in the client
 * map; a worker holding no op keeps no client record; the pinned bytes stay within their bound.
 *
 * <p>The worker's constructor computes the cap. The check is for a simulator that steps the worker
 * and asks between passes; it is never on the transfer path, allocates, and runs on the worker's
 * thread (the stepping one) only, between passes.
 */
public final class WorkerAccounting {
  private WorkerAccounting() {}

  /**
   * The in-flight cap: the configured value (at least 1), clamped to the provider's transmit depth
   * so the worker limits itself below {@code -FI_EAGAIN}. A depth of 0 means "no fixed depth";
   * clamping to it would serialize everything at 1.
   *
   * @param configured the configured cap
   * @param maxTx the provider's depth, or 0
   * @return the cap
   */
  public static int inFlightCap(int configured, int maxTx) {
    int requested = Math.max(1, configured);
    return maxTx <= 0 ? requested : Math.min(requested, maxTx);
  }

  /**
   * What is inconsistent in {@code worker}'s accounting, or null when all is.
   *
   * @param worker the worker, between passes
   * @param <T> the caller context type
   * @return the first inconsistency found, or null
   */
  public static <T extends Operands> @Nullable String violation(FabricWorker<T> worker) {
    ClientMap<Client> clients = worker.clients;
    int used = 0;
    Map<Client, Integer> held = new IdentityHashMap<>();
    for (Op<T> op : worker.slots) {
      if (op != null) {
        used++;
        held.merge(op.client, 1, Integer::sum);
      }
    }
    if (worker.freeSlotCount + used != worker.cap) {
      return "free slots " + worker.freeSlotCount + " + used " + used + " != cap " + worker.cap;
    }
    if (worker.inFlight != used) {
      return "inFlight " + worker.inFlight + " != occupied slots " + used;
    }
    for (Op<T> op : worker.pending) {
      held.merge(op.client, 1, Integer::sum);
    }
    for (Op<T> op : worker.deferred) {
      held.merge(op.client, 1, Integer::sum);
    }
    for (Map.Entry<Client, Integer> each : held.entrySet()) {
      Client client = each.getKey();
      if (client == null || client.outstanding < each.getValue()) {
        return "client "
            + (client == null ? "null" : client.id + " counts " + client.outstanding)
            + " for "
            + each.getValue()
            + " ops held";
      }
      if (clients.get(client.id) != client) {
        return "client " + client.id + " holds ops but is not in the client map";
      }
    }
    if (held.isEmpty() && worker.checksums.size() == 0 && clients.size() != 0) {
      return "no op held, yet " + clients.size() + " client records remain";
    }
    long pinned = worker.regions.pinnedBytes();
    if (pinned < 0 || pinned > worker.regions.maxPinnedBytes()) {
      return "pinned bytes " + pinned + " outside [0, " + worker.regions.maxPinnedBytes() + "]";
    }
    return null;
  }
}

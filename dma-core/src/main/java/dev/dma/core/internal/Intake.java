package dev.dma.core.internal;

import dev.dma.api.Checksum;
import dev.dma.api.Direction;
import dev.dma.api.DmaException;
import dev.dma.api.MemoryKind;
import dev.dma.api.Operands;
import dev.dma.api.TransferRequest;
import java.lang.foreign.MemorySegment;
import java.util.HexFormat;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;

/**
 * The whole-request checks every transfer passes before anything of it is posted, in one place for
 * the worker (each transfer at intake) and for a group's striping (the whole request, before it is
 * cut into chunks), so that both refuse the same requests with the same text.
 *
 * <p>The checks, in this order: the caller's context supplies its operand ({@link
 * Operands#resolve}; any {@link Throwable} it throws, an {@link Error} included, fails the transfer
 * only), the transfer lies inside the region its client advertised, and a checksummed operand is
 * readable from a checksum-pool thread: memory the CPU can read ({@link MemoryKind#cpuReadable()},
 * asked of the request's context) and not confined to one thread. Each failure is a {@link
 * DmaException} of reason {@link DmaException.Reason#BAD_REQUEST} naming what was wrong.
 *
 * <p>Threads: stateless, any thread. It allocates nothing for a request that passes.
 */
public final class Intake {
  /** The text of a checksummed transfer refused because its operand is confined to one thread. */
  public static final String CONFINED_CHECKSUM =
      "a checksummed transfer's operand is in a confined arena, which its checksum-pool thread"
          + " cannot read; use a shared, global or automatic arena segment, or no checksum";

  /**
   * The text of a checksummed transfer refused because the CPU cannot read its operand's kind of
   * memory.
   *
   * @param kind the operand's kind, as its context reported it
   * @return the text, naming the kind and what to do
   */
  public static String unreadableChecksum(MemoryKind kind) {
    return "a checksummed transfer's operand is "
        + kind.name()
        + " memory, which the CPU cannot read to take its checksum; send it without a checksum,"
        + " or copy it to host memory first";
  }

  /**
   * A thread that owns no arena, since it never runs: a segment it may access is accessible from
   * every thread (shared, global or automatic), a confined one is not.
   */
  private static final Thread NO_ARENA_OWNER = Thread.ofPlatform().unstarted(() -> {});

  private Intake() {}

  /**
   * The request's local operand, checked.
   *
   * @param request the transfer as submitted
   * @param askedSource a write's source when the caller asked the context for it already (a group
   *     sizing a write to stripe it), so that it is not asked twice; otherwise null
   * @param peerText renders the request's peer address for the out-of-bounds text (the endpoint's
   *     {@code peerText}, a pure function); called only when the request is refused
   * @return the operand: a read's destination or a write's source
   * @throws DmaException of reason {@link DmaException.Reason#BAD_REQUEST} naming what was wrong
   */
  public static MemorySegment checkedOperand(
      TransferRequest<?> request,
      @Nullable MemorySegment askedSource,
      Function<byte[], String> peerText) {
    MemorySegment operand = resolve(request, askedSource);
    long lengthBytes = Operands.lengthOf(request.direction(), operand);
    String outside = request.outOfBoundsReason(lengthBytes);
    if (outside != null) {
      // Known bad before posting: the only protection where the provider checks neither keys nor
      // bounds (shm), and a torn-down connection spared elsewhere (tcp;ofi_rxm).
      throw DmaException.fabric(
          DmaException.Reason.BAD_REQUEST,
          clientText(request.clientId(), request.peerAddress(), peerText) + ": " + outside);
    }
    if (request.checksum() == Checksum.CRC32C) {
      MemoryKind kind = Operands.kindOf(request.context());
      if (!kind.cpuReadable()) {
        // Refused before the RMA: the CRC is taken by a CPU thread reading the operand, which
        // memory of this kind does not allow.
        throw DmaException.fabric(DmaException.Reason.BAD_REQUEST, unreadableChecksum(kind));
      }
    }
    if (request.checksum() == Checksum.CRC32C && !operand.isAccessibleBy(NO_ARENA_OWNER)) {
      // Refused before the RMA: the CRC is taken on a pool thread, which would get a
      // WrongThreadException only after the bytes had moved.
      throw DmaException.fabric(DmaException.Reason.BAD_REQUEST, CONFINED_CHECKSUM);
    }
    return operand;
  }

  /** The operand from the caller's context; whatever the context throws fails this transfer. */
  private static MemorySegment resolve(
      TransferRequest<?> request, @Nullable MemorySegment askedSource) {
    try {
      return askedSource != null
          ? Operands.resolve(Operands.of(askedSource), Direction.TO_PEER)
          : Operands.resolve(request.context(), request.direction());
    } catch (DmaException refused) {
      throw refused;
    } catch (Throwable callerBug) {
      // The caller's source() or allocate() threw, an Error included (allocate() running out of
      // direct memory throws OutOfMemoryError): that fails this transfer only, and the caller's
      // service keeps serving every other.
      throw new DmaException(
          DmaException.Kind.FABRIC,
          DmaException.Reason.BAD_REQUEST,
          "the caller context failed to supply its operand: " + callerBug,
          DmaException.UNKNOWN_ERRNO,
          DmaException.UNKNOWN_ERRNO,
          callerBug);
    }
  }

  /**
   * "client 7 at 10.0.0.2:4711": the client and the peer address a failure concerns; the address in
   * hex when rendering it throws (malformed bytes).
   *
   * @param clientId the client
   * @param address its peer address
   * @param peerText the endpoint's rendering of an address
   * @return the text
   */
  public static String clientText(
      long clientId, byte[] address, Function<byte[], String> peerText) {
    String at;
    try {
      at = peerText.apply(address);
    } catch (RuntimeException malformed) {
      at = HexFormat.of().formatHex(address);
    }
    return "client " + clientId + " at " + at;
  }
}

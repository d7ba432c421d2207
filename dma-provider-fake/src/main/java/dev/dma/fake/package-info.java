/**
 * Provider {@code fake}: an in-JVM fabric with real byte copies and a deterministic fault script,
 * for the fabric worker's tests and for users' unit tests.
 *
 * <ul>
 *   <li>{@link dev.dma.fake.FakeFabric}: a named fabric, registered process-wide so a configuration
 *       reaches it through {@code interfaces}; owns the script and the counters.
 *   <li>{@link dev.dma.fake.FakeEndpoint}: the {@link dev.dma.spi.FabricEndpoint}; RMA copies real
 *       bytes, checks keys, bounds and access, and counts every contract violation.
 *   <li>{@link dev.dma.fake.FakeScript}: {@code -FI_EAGAIN}, transmit depth, held and reordered
 *       completions, failed ops and CQ reads, unreachable peers, and EFA's rules on demand.
 *   <li>{@link dev.dma.fake.FakeCounters}, {@link dev.dma.fake.OpMatcher}, {@link
 *       dev.dma.fake.FakeOp}, {@link dev.dma.fake.FiErrno}: what tests assert and script with.
 *   <li>{@link dev.dma.fake.FakeProvider}: the {@link dev.dma.spi.FabricProvider} named {@code
 *       fake}.
 * </ul>
 *
 * <p>Behind {@code FakeEndpoint}, package-private, one concern each: {@code SpiContract} (which
 * calls break the SPI and their texts), {@code ScriptedDecisions} (how the script answers a valid
 * call), {@code Rma} (target checks and the byte copy), {@code ParkedOps} (held ops and ops waiting
 * for their target), {@code ReapBatch} (reap under the lock, delivery outside it), {@code
 * TargetProgress} (the endpoint as a passive target), {@code OpAudit}, {@code ExposedRegions} and
 * {@code FakePeers}.
 */
@NullMarked
package dev.dma.fake;

import org.jspecify.annotations.NullMarked;

/**
 * A value cache over dma, as a first application: a {@link dev.dma.examples.cache.CacheServer}
 * keeps values in native memory and moves them by RMA into and out of its clients' exposed buffers;
 * a {@link dev.dma.examples.cache.CacheClient} is passive (a {@link dev.dma.core.PassiveTarget}
 * with one exposed buffer) and talks to the server over its own socket control channel.
 *
 * <h2>The control channel</h2>
 *
 * One TCP connection per client, one UTF-8 line per message, every request answered by one line:
 *
 * <table>
 *   <caption>Messages</caption>
 *   <tr><th>client sends</th><th>server does</th><th>server answers</th></tr>
 *   <tr><td>{@code HELLO <address> <rkey> <remote-address> <length>}: the client's buffer, as
 *       {@link dev.dma.api.Advertisement#toFields()} writes it</td><td>gives the connection a new
 *       client id and {@code addPeer}s the address, so a bad one fails now</td><td>{@code OK
 *       <client-id>}</td></tr>
 *   <tr><td>{@code PUT <key> <length>}: the value is in the client's buffer, from offset 0</td>
 *       <td>an RMA read of {@code length} bytes from the buffer into fresh server memory, which
 *       then replaces the key's value</td><td>{@code OK <crc32c> <chunks>}</td></tr>
 *   <tr><td>{@code GET <key>}</td><td>an RMA write of the value into the client's buffer, from
 *       offset 0</td><td>{@code OK <length> <crc32c> <chunks>}, or {@code MISSING}</td></tr>
 *   <tr><td>{@code BYE}</td><td>{@code removePeer}, then closes the connection</td><td>{@code
 *       OK}</td></tr>
 * </table>
 *
 * A request that fails is answered {@code ERR <reason> <message>}, the reason being {@link
 * dev.dma.api.DmaException.Reason}'s name (or {@code BAD_REQUEST} for a malformed line); the
 * connection stays usable. {@code <crc32c>} is eight hex digits, {@code <chunks>} is {@link
 * dev.dma.api.Completion#chunks()}: more than 1 when the server striped the transfer.
 *
 * <h2>Running it</h2>
 *
 * Two processes on one host, over tcp on loopback (class path: this module's jar and its runtime
 * dependencies; with libfabric installed):
 *
 * <pre>{@code
 * java --enable-native-access=ALL-UNNAMED -cp ... dev.dma.examples.cache.CacheServer 127.0.0.1 7000
 * java --enable-native-access=ALL-UNNAMED -cp ... dev.dma.examples.cache.CacheClient 127.0.0.1 7000 1048576
 * }</pre>
 *
 * The tests run exactly that (the client in a child JVM) and the same server code on the fake
 * provider, in one JVM.
 */
@NullMarked
package dev.dma.examples.cache;

import org.jspecify.annotations.NullMarked;

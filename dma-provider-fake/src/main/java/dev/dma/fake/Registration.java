package dev.dma.fake;

/**
 * A local registration: a range of native memory registered by one endpoint. Immutable; the fabric
 * keeps the live ones by id ({@link FakeFabric#registration(long)}), and {@link Registrations}
 * turns ids into the handles and descriptors endpoints hand out.
 */
final class Registration {
  final long id;
  final FakeEndpoint owner;
  final long address;
  final long lengthBytes;

  Registration(long id, FakeEndpoint owner, long address, long lengthBytes) {
    this.id = id;
    this.owner = owner;
    this.address = address;
    this.lengthBytes = lengthBytes;
  }
}

package dev.dma.provider.efa;

import dev.dma.api.Errno;
import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * The libfabric constants this module decides on, grouped by the field they belong to (libfabric
 * reuses bit positions across namespaces). The binding's own table is internal to {@code
 * dev.dma.libfabric}, so this module keeps its own, and {@code EfaAbiTest} compiles every {@link
 * Header} expression against the installed headers and fails on a difference. The EFA provider's
 * own status codes are not in any installed header; they are in {@link EfaErrors}, from {@code
 * prov/efa/src/efa_errno.h}.
 */
final class EfaAbi {
  private EfaAbi() {}

  /** The C expression, over the installed libfabric headers, a constant must equal. */
  @Documented
  @Retention(RetentionPolicy.RUNTIME)
  @Target(ElementType.FIELD)
  @interface Header {
    String value();
  }

  // ---- fi_info.caps ----
  @Header("FI_MSG")
  static final long FI_MSG = 1L << 1;

  @Header("FI_RMA")
  static final long FI_RMA = 1L << 2;

  @Header("FI_READ")
  static final long FI_READ = 1L << 8;

  @Header("FI_WRITE")
  static final long FI_WRITE = 1L << 9;

  @Header("FI_REMOTE_READ")
  static final long FI_REMOTE_READ = 1L << 12;

  @Header("FI_REMOTE_WRITE")
  static final long FI_REMOTE_WRITE = 1L << 13;

  @Header("FI_SOURCE")
  static final long FI_SOURCE_CAP = 1L << 57;

  /** What one-sided RMA both ways needs from an entry. */
  static final long RMA_CAPS = FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

  // ---- fi_info.mode ----
  @Header("FI_CONTEXT")
  static final long FI_CONTEXT = 1L << 59;

  @Header("FI_CONTEXT2")
  static final long FI_CONTEXT2 = 1L << 52;

  @Header("FI_RX_CQ_DATA")
  static final long FI_RX_CQ_DATA = 1L << 56;

  @Header("FI_MSG_PREFIX")
  static final long FI_MSG_PREFIX = 1L << 58;

  // ---- domain_attr.mr_mode ----
  @Header("FI_MR_LOCAL")
  static final int FI_MR_LOCAL = 1 << 2;

  @Header("FI_MR_VIRT_ADDR")
  static final int FI_MR_VIRT_ADDR = 1 << 4;

  @Header("FI_MR_ALLOCATED")
  static final int FI_MR_ALLOCATED = 1 << 5;

  @Header("FI_MR_PROV_KEY")
  static final int FI_MR_PROV_KEY = 1 << 6;

  @Header("FI_MR_HMEM")
  static final int FI_MR_HMEM = 1 << 10;

  // ---- enums ----
  @Header("FI_ADDR_EFA")
  static final int FI_ADDR_EFA = 12;

  @Header("FI_EP_RDM")
  static final int FI_EP_RDM = 3;

  @Header("FI_THREAD_SAFE")
  static final int FI_THREAD_SAFE = 1;

  @Header("FI_PROGRESS_AUTO")
  static final int FI_PROGRESS_AUTO = 1;

  @Header("FI_PROGRESS_MANUAL")
  static final int FI_PROGRESS_MANUAL = 2;

  @Header("FI_VERSION(2, 1)")
  static final int FI_VERSION_2_1 = (2 << 16) | 1;

  // ---- errors (positive; returned negated): dev.dma.api.Errno's, checked here again ----
  @Header("FI_ENOMEM")
  static final int FI_ENOMEM = Errno.FI_ENOMEM;

  @Header("FI_EACCES")
  static final int FI_EACCES = Errno.FI_EACCES;

  @Header("FI_EINVAL")
  static final int FI_EINVAL = Errno.FI_EINVAL;

  @Header("FI_EMSGSIZE")
  static final int FI_EMSGSIZE = Errno.FI_EMSGSIZE;

  @Header("FI_EOPNOTSUPP")
  static final int FI_EOPNOTSUPP = Errno.FI_EOPNOTSUPP;

  @Header("FI_ECONNABORTED")
  static final int FI_ECONNABORTED = Errno.FI_ECONNABORTED;

  @Header("FI_ECONNRESET")
  static final int FI_ECONNRESET = Errno.FI_ECONNRESET;

  @Header("FI_ENOTCONN")
  static final int FI_ENOTCONN = Errno.FI_ENOTCONN;

  @Header("FI_EHOSTUNREACH")
  static final int FI_EHOSTUNREACH = Errno.FI_EHOSTUNREACH;

  @Header("FI_EREMOTEIO")
  static final int FI_EREMOTEIO = Errno.FI_EREMOTEIO;

  @Header("FI_ECANCELED")
  static final int FI_ECANCELED = Errno.FI_ECANCELED;

  @Header("FI_ENORX")
  static final int FI_ENORX = Errno.FI_ENORX;
}

package dev.dma.libfabric.internal;

import dev.dma.api.Errno;

/**
 * Every struct offset, struct size and constant the binding uses, for x86_64 LP64 and the libfabric
 * 1.x/2.x ABI (offsets of these fields are unchanged from 1.17 to 2.x; newer versions only append).
 *
 * <p>Each field carries the {@link C} expression it must equal; {@code AbiTest} compiles them all
 * against the installed headers and fails on any difference. Nothing else in the binding may use a
 * numeric offset or constant: add it here, with its expression, so the test covers it. Constants
 * are grouped by the field they belong to, because libfabric reuses bit positions across namespaces
 * (1&lt;&lt;59 is FI_CONTEXT as a mode bit but FI_SELECTIVE_COMPLETION as a bind flag).
 *
 * <p>Internal: not exported from the module and not API.
 */
public final class Abi {
  private Abi() {}

  // ---- versions ----

  /** {@code FI_VERSION(1, 20)}: from here {@code fi_cq_err_entry} carries {@code src_addr}. */
  @C("FI_VERSION(1, 20)")
  public static final int FI_VERSION_1_20 = (1 << 16) | 20;

  /** {@code FI_VERSION(2, 0)}: the first 2.x API. */
  @C("FI_VERSION(2, 0)")
  public static final int FI_VERSION_2_0 = 2 << 16;

  /**
   * {@code FI_VERSION(2, 5)}: the first release whose sockets provider answers {@code fi_av_remove}
   * of a never-connected peer with {@code -FI_EINVAL}, and the first API with counter limits in
   * {@code fi_domain_attr}.
   */
  @C("FI_VERSION(2, 5)")
  public static final int FI_VERSION_2_5 = (2 << 16) | 5;

  /** {@code FI_VERSION(2, 6)}: the newest API dma has been verified against (see Native). */
  @C("FI_VERSION(2, 6)")
  public static final int FI_VERSION_2_6 = (2 << 16) | 6;

  // ---- struct fi_info ----

  /** {@code fi_info.next}. */
  @C("offsetof(struct fi_info, next)")
  public static final long INFO_NEXT = 0;

  /** {@code fi_info.caps}. */
  @C("offsetof(struct fi_info, caps)")
  public static final long INFO_CAPS = 8;

  /** {@code fi_info.mode}. */
  @C("offsetof(struct fi_info, mode)")
  public static final long INFO_MODE = 16;

  /** {@code fi_info.addr_format} (a 4-byte enum). */
  @C("offsetof(struct fi_info, addr_format)")
  public static final long INFO_ADDR_FORMAT = 24;

  /** {@code fi_info.tx_attr}. */
  @C("offsetof(struct fi_info, tx_attr)")
  public static final long INFO_TX_ATTR = 72;

  /** {@code fi_info.ep_attr}. */
  @C("offsetof(struct fi_info, ep_attr)")
  public static final long INFO_EP_ATTR = 88;

  /** {@code fi_info.domain_attr}. */
  @C("offsetof(struct fi_info, domain_attr)")
  public static final long INFO_DOMAIN_ATTR = 96;

  /** {@code fi_info.fabric_attr}. */
  @C("offsetof(struct fi_info, fabric_attr)")
  public static final long INFO_FABRIC_ATTR = 104;

  /** {@code fi_tx_attr.inject_size}. */
  @C("offsetof(struct fi_tx_attr, inject_size)")
  public static final long TX_ATTR_INJECT_SIZE = 40;

  /** {@code fi_tx_attr.size}. */
  @C("offsetof(struct fi_tx_attr, size)")
  public static final long TX_ATTR_SIZE = 48;

  /** {@code fi_ep_attr.type} (a 4-byte enum). */
  @C("offsetof(struct fi_ep_attr, type)")
  public static final long EP_ATTR_TYPE = 0;

  /** {@code fi_domain_attr.name}. */
  @C("offsetof(struct fi_domain_attr, name)")
  public static final long DOMAIN_ATTR_NAME = 8;

  /** {@code fi_domain_attr.threading} (a 4-byte enum). */
  @C("offsetof(struct fi_domain_attr, threading)")
  public static final long DOMAIN_ATTR_THREADING = 16;

  /** {@code fi_domain_attr.data_progress} (a 4-byte enum). */
  @C("offsetof(struct fi_domain_attr, data_progress)")
  public static final long DOMAIN_ATTR_DATA_PROGRESS = 24;

  /** {@code fi_domain_attr.mr_mode} (int). */
  @C("offsetof(struct fi_domain_attr, mr_mode)")
  public static final long DOMAIN_ATTR_MR_MODE = 36;

  /** {@code fi_fabric_attr.name}. */
  @C("offsetof(struct fi_fabric_attr, name)")
  public static final long FABRIC_ATTR_NAME = 8;

  /** {@code fi_fabric_attr.prov_name}. */
  @C("offsetof(struct fi_fabric_attr, prov_name)")
  public static final long FABRIC_ATTR_PROV_NAME = 16;

  /** {@code fi_fabric_attr.api_version} (uint32): the version {@code fi_getinfo} was asked for. */
  @C("offsetof(struct fi_fabric_attr, api_version)")
  public static final long FABRIC_ATTR_API_VERSION = 28;

  // ---- fid and the ops tables ----

  /** {@code fid.ops}: the {@code fi_ops} table of every object. */
  @C("offsetof(struct fid, ops)")
  public static final long FID_OPS = 16;

  /** {@code fi_ops.close}. */
  @C("offsetof(struct fi_ops, close)")
  public static final long OPS_CLOSE = 8;

  /** {@code fi_ops.bind}. */
  @C("offsetof(struct fi_ops, bind)")
  public static final long OPS_BIND = 16;

  /** {@code fi_ops.control}. */
  @C("offsetof(struct fi_ops, control)")
  public static final long OPS_CONTROL = 24;

  /** {@code fid_fabric.ops}. */
  @C("offsetof(struct fid_fabric, ops)")
  public static final long FABRIC_OPS = 24;

  /** {@code fid_fabric.api_version} (uint32): the version the providers see for this fabric. */
  @C("offsetof(struct fid_fabric, api_version)")
  public static final long FABRIC_API_VERSION = 32;

  /** {@code fi_ops_fabric.domain}. */
  @C("offsetof(struct fi_ops_fabric, domain)")
  public static final long OPS_FABRIC_DOMAIN = 8;

  /** {@code fi_ops_fabric.trywait}: {@code fi_trywait(fabric, fids, count)}. */
  @C("offsetof(struct fi_ops_fabric, trywait)")
  public static final long OPS_FABRIC_TRYWAIT = 40;

  /** {@code fid_domain.ops}. */
  @C("offsetof(struct fid_domain, ops)")
  public static final long DOMAIN_OPS = 24;

  /** {@code fid_domain.mr}. */
  @C("offsetof(struct fid_domain, mr)")
  public static final long DOMAIN_MR = 32;

  /** {@code fi_ops_domain.av_open}. */
  @C("offsetof(struct fi_ops_domain, av_open)")
  public static final long OPS_DOMAIN_AV_OPEN = 8;

  /** {@code fi_ops_domain.cq_open}. */
  @C("offsetof(struct fi_ops_domain, cq_open)")
  public static final long OPS_DOMAIN_CQ_OPEN = 16;

  /** {@code fi_ops_domain.endpoint}. */
  @C("offsetof(struct fi_ops_domain, endpoint)")
  public static final long OPS_DOMAIN_ENDPOINT = 24;

  /** {@code fi_ops_domain.cntr_open}. */
  @C("offsetof(struct fi_ops_domain, cntr_open)")
  public static final long OPS_DOMAIN_CNTR_OPEN = 40;

  /** {@code fid_cntr.ops}. */
  @C("offsetof(struct fid_cntr, ops)")
  public static final long CNTR_OPS = 24;

  /** {@code fi_ops_cntr.read}. */
  @C("offsetof(struct fi_ops_cntr, read)")
  public static final long OPS_CNTR_READ = 8;

  /** {@code sizeof(struct fi_cntr_attr)}: zeroed, it asks for completion events, no wait object. */
  @C("sizeof(struct fi_cntr_attr)")
  public static final long CNTR_ATTR_BYTES = 24;

  /** {@code fi_ops_mr.reg}. */
  @C("offsetof(struct fi_ops_mr, reg)")
  public static final long OPS_MR_REG = 8;

  /** {@code fid_ep.cm}. */
  @C("offsetof(struct fid_ep, cm)")
  public static final long EP_CM = 32;

  /** {@code fid_ep.rma}. */
  @C("offsetof(struct fid_ep, rma)")
  public static final long EP_RMA = 48;

  /** {@code fi_ops_cm.getname}. */
  @C("offsetof(struct fi_ops_cm, getname)")
  public static final long OPS_CM_GETNAME = 16;

  /** {@code fi_ops_rma.read}. */
  @C("offsetof(struct fi_ops_rma, read)")
  public static final long OPS_RMA_READ = 8;

  /** {@code fid_ep.atomic}. */
  @C("offsetof(struct fid_ep, atomic)")
  public static final long EP_ATOMIC = 64;

  /** {@code fi_ops_atomic.readwritemsg}: {@code fi_fetch_atomicmsg}. */
  @C("offsetof(struct fi_ops_atomic, readwritemsg)")
  public static final long OPS_ATOMIC_READWRITEMSG = 56;

  /** {@code fi_ops_rma.writemsg}. */
  @C("offsetof(struct fi_ops_rma, writemsg)")
  public static final long OPS_RMA_WRITEMSG = 48;

  /** {@code fid_cq.ops}. */
  @C("offsetof(struct fid_cq, ops)")
  public static final long CQ_OPS = 24;

  /** {@code fi_ops_cq.read}. */
  @C("offsetof(struct fi_ops_cq, read)")
  public static final long OPS_CQ_READ = 8;

  /** {@code fi_ops_cq.readerr}. */
  @C("offsetof(struct fi_ops_cq, readerr)")
  public static final long OPS_CQ_READERR = 24;

  /** {@code fi_ops_cq.strerror}. */
  @C("offsetof(struct fi_ops_cq, strerror)")
  public static final long OPS_CQ_STRERROR = 56;

  /** {@code fid_av.ops}. */
  @C("offsetof(struct fid_av, ops)")
  public static final long AV_OPS = 24;

  /** {@code fi_ops_av.insert}. */
  @C("offsetof(struct fi_ops_av, insert)")
  public static final long OPS_AV_INSERT = 8;

  /** {@code fi_ops_av.remove}. */
  @C("offsetof(struct fi_ops_av, remove)")
  public static final long OPS_AV_REMOVE = 32;

  /** {@code fi_ops_av.lookup}. */
  @C("offsetof(struct fi_ops_av, lookup)")
  public static final long OPS_AV_LOOKUP = 40;

  /** {@code fid_mr.mem_desc} ({@code fi_mr_desc} is this field). */
  @C("offsetof(struct fid_mr, mem_desc)")
  public static final long MR_MEM_DESC = 24;

  /** {@code fid_mr.key} ({@code fi_mr_key} is this field). */
  @C("offsetof(struct fid_mr, key)")
  public static final long MR_KEY = 32;

  // ---- application-allocated structs ----

  /** {@code sizeof(struct fi_cq_attr)} in these headers; allocations add slack for newer ones. */
  @C("sizeof(struct fi_cq_attr)")
  public static final long CQ_ATTR_SIZE = 40;

  /** {@code fi_cq_attr.format} (a 4-byte enum). */
  @C("offsetof(struct fi_cq_attr, format)")
  public static final long CQ_ATTR_FORMAT = 16;

  /** {@code fi_cq_attr.wait_obj} (a 4-byte enum). */
  @C("offsetof(struct fi_cq_attr, wait_obj)")
  public static final long CQ_ATTR_WAIT_OBJ = 20;

  /** {@code FI_WAIT_FD}: a completion queue whose wait object is a file descriptor. */
  @C("FI_WAIT_FD")
  public static final int FI_WAIT_FD = 3;

  /** {@code FI_GETWAIT} (an {@code fi_control} command): the wait object, here the fd. */
  @C("FI_GETWAIT")
  public static final int FI_GETWAIT = 5;

  /** {@code sizeof(struct fi_av_attr)}. */
  @C("sizeof(struct fi_av_attr)")
  public static final long AV_ATTR_SIZE = 48;

  /** {@code fi_av_attr.type} (a 4-byte enum). */
  @C("offsetof(struct fi_av_attr, type)")
  public static final long AV_ATTR_TYPE = 0;

  /** {@code sizeof(struct fi_cq_entry)}: one {@code FI_CQ_FORMAT_CONTEXT} entry. */
  @C("sizeof(struct fi_cq_entry)")
  public static final long CQ_ENTRY_SIZE = 8;

  /** {@code fi_cq_entry.op_context}. */
  @C("offsetof(struct fi_cq_entry, op_context)")
  public static final long CQ_ENTRY_OP_CONTEXT = 0;

  /** {@code fi_cq_err_entry.op_context}. */
  @C("offsetof(struct fi_cq_err_entry, op_context)")
  public static final long ERR_OP_CONTEXT = 0;

  /** {@code fi_cq_err_entry.err} (int; shm has been seen to report it negative). */
  @C("offsetof(struct fi_cq_err_entry, err)")
  public static final long ERR_ERR = 56;

  /** {@code fi_cq_err_entry.prov_errno} (int). */
  @C("offsetof(struct fi_cq_err_entry, prov_errno)")
  public static final long ERR_PROV_ERRNO = 60;

  /** {@code fi_cq_err_entry.err_data}. */
  @C("offsetof(struct fi_cq_err_entry, err_data)")
  public static final long ERR_ERR_DATA = 64;

  /** {@code fi_cq_err_entry.err_data_size}. */
  @C("offsetof(struct fi_cq_err_entry, err_data_size)")
  public static final long ERR_ERR_DATA_SIZE = 72;

  /** {@code sizeof(struct fi_cq_err_entry)} for API versions before 1.20. */
  @C("offsetof(struct fi_cq_err_entry, err_data_size) + sizeof(size_t)")
  public static final long ERR_ENTRY_SIZE_1_0 = 80;

  /**
   * {@code fi_cq_err_entry.src_addr}, appended in 1.20: the provider copies it only when the fabric
   * was opened with API version 1.20 or newer.
   */
  @C("offsetof(struct fi_cq_err_entry, err_data_size) + sizeof(size_t)")
  public static final long ERR_SRC_ADDR_1_20 = 80;

  /** {@code sizeof(struct fi_cq_err_entry)} from API version 1.20 on. */
  @C("offsetof(struct fi_cq_err_entry, err_data_size) + sizeof(size_t) + sizeof(fi_addr_t)")
  public static final long ERR_ENTRY_SIZE_1_20 = 88;

  /** {@code sizeof(struct fi_context2)}: the per-operation context slot. */
  @C("sizeof(struct fi_context2)")
  public static final long CONTEXT2_SIZE = 64;

  /** {@code sizeof(struct iovec)}. */
  @C("sizeof(struct iovec)")
  public static final long IOVEC_SIZE = 16;

  /** {@code iovec.iov_base}. */
  @C("offsetof(struct iovec, iov_base)")
  public static final long IOVEC_BASE = 0;

  /** {@code iovec.iov_len}. */
  @C("offsetof(struct iovec, iov_len)")
  public static final long IOVEC_LEN = 8;

  /** {@code sizeof(struct fi_rma_iov)}. */
  @C("sizeof(struct fi_rma_iov)")
  public static final long RMA_IOV_SIZE = 24;

  /** {@code fi_rma_iov.addr}. */
  @C("offsetof(struct fi_rma_iov, addr)")
  public static final long RMA_IOV_ADDR = 0;

  /** {@code fi_rma_iov.len}. */
  @C("offsetof(struct fi_rma_iov, len)")
  public static final long RMA_IOV_LEN = 8;

  /** {@code fi_rma_iov.key}. */
  @C("offsetof(struct fi_rma_iov, key)")
  public static final long RMA_IOV_KEY = 16;

  /** {@code sizeof(struct fi_msg_rma)}. */
  @C("sizeof(struct fi_msg_rma)")
  public static final long MSG_RMA_SIZE = 64;

  /** {@code fi_msg_rma.msg_iov}. */
  @C("offsetof(struct fi_msg_rma, msg_iov)")
  public static final long MSG_RMA_MSG_IOV = 0;

  /** {@code fi_msg_rma.desc}. */
  @C("offsetof(struct fi_msg_rma, desc)")
  public static final long MSG_RMA_DESC = 8;

  /** {@code fi_msg_rma.iov_count}. */
  @C("offsetof(struct fi_msg_rma, iov_count)")
  public static final long MSG_RMA_IOV_COUNT = 16;

  /** {@code fi_msg_rma.addr}. */
  @C("offsetof(struct fi_msg_rma, addr)")
  public static final long MSG_RMA_ADDR = 24;

  /** {@code fi_msg_rma.rma_iov}. */
  @C("offsetof(struct fi_msg_rma, rma_iov)")
  public static final long MSG_RMA_RMA_IOV = 32;

  /** {@code fi_msg_rma.rma_iov_count}. */
  @C("offsetof(struct fi_msg_rma, rma_iov_count)")
  public static final long MSG_RMA_RMA_IOV_COUNT = 40;

  /** {@code fi_msg_rma.context}. */
  @C("offsetof(struct fi_msg_rma, context)")
  public static final long MSG_RMA_CONTEXT = 48;

  /** {@code fi_msg_rma.data}. */
  @C("offsetof(struct fi_msg_rma, data)")
  public static final long MSG_RMA_DATA = 56;

  /** {@code sizeof(struct fi_ioc)}. */
  @C("sizeof(struct fi_ioc)")
  public static final long IOC_SIZE = 16;

  /** {@code fi_ioc.addr}. */
  @C("offsetof(struct fi_ioc, addr)")
  public static final long IOC_ADDR = 0;

  /** {@code fi_ioc.count}. */
  @C("offsetof(struct fi_ioc, count)")
  public static final long IOC_COUNT = 8;

  /** {@code sizeof(struct fi_rma_ioc)}. */
  @C("sizeof(struct fi_rma_ioc)")
  public static final long RMA_IOC_SIZE = 24;

  /** {@code fi_rma_ioc.addr}. */
  @C("offsetof(struct fi_rma_ioc, addr)")
  public static final long RMA_IOC_ADDR = 0;

  /** {@code fi_rma_ioc.count}. */
  @C("offsetof(struct fi_rma_ioc, count)")
  public static final long RMA_IOC_COUNT = 8;

  /** {@code fi_rma_ioc.key}. */
  @C("offsetof(struct fi_rma_ioc, key)")
  public static final long RMA_IOC_KEY = 16;

  /** {@code sizeof(struct fi_msg_atomic)}. */
  @C("sizeof(struct fi_msg_atomic)")
  public static final long MSG_ATOMIC_SIZE = 72;

  /** {@code fi_msg_atomic.msg_iov}. */
  @C("offsetof(struct fi_msg_atomic, msg_iov)")
  public static final long MSG_ATOMIC_MSG_IOV = 0;

  /** {@code fi_msg_atomic.desc}. */
  @C("offsetof(struct fi_msg_atomic, desc)")
  public static final long MSG_ATOMIC_DESC = 8;

  /** {@code fi_msg_atomic.iov_count}. */
  @C("offsetof(struct fi_msg_atomic, iov_count)")
  public static final long MSG_ATOMIC_IOV_COUNT = 16;

  /** {@code fi_msg_atomic.addr}. */
  @C("offsetof(struct fi_msg_atomic, addr)")
  public static final long MSG_ATOMIC_ADDR = 24;

  /** {@code fi_msg_atomic.rma_iov}. */
  @C("offsetof(struct fi_msg_atomic, rma_iov)")
  public static final long MSG_ATOMIC_RMA_IOV = 32;

  /** {@code fi_msg_atomic.rma_iov_count}. */
  @C("offsetof(struct fi_msg_atomic, rma_iov_count)")
  public static final long MSG_ATOMIC_RMA_IOV_COUNT = 40;

  /** {@code fi_msg_atomic.datatype} (an int-sized enum). */
  @C("offsetof(struct fi_msg_atomic, datatype)")
  public static final long MSG_ATOMIC_DATATYPE = 48;

  /** {@code fi_msg_atomic.op} (an int-sized enum). */
  @C("offsetof(struct fi_msg_atomic, op)")
  public static final long MSG_ATOMIC_OP = 52;

  /** {@code fi_msg_atomic.context}. */
  @C("offsetof(struct fi_msg_atomic, context)")
  public static final long MSG_ATOMIC_CONTEXT = 56;

  /** {@code fi_msg_atomic.data}. */
  @C("offsetof(struct fi_msg_atomic, data)")
  public static final long MSG_ATOMIC_DATA = 64;

  /** {@code FI_UINT8} ({@code enum fi_datatype}). */
  @C("FI_UINT8")
  public static final int FI_UINT8 = 1;

  /** {@code FI_BOR} ({@code enum fi_op}): bitwise or. */
  @C("FI_BOR")
  public static final int FI_BOR = 6;

  /** {@code FI_BAND} ({@code enum fi_op}): bitwise and. */
  @C("FI_BAND")
  public static final int FI_BAND = 7;

  // ---- capability and operation flags (uint64_t: fi_info.caps, op flags, bind flags) ----

  /** {@code FI_MSG}. */
  @C("FI_MSG")
  public static final long FI_MSG = 1L << 1;

  /** {@code FI_RMA}. */
  @C("FI_RMA")
  public static final long FI_RMA = 1L << 2;

  /** {@code FI_READ}. */
  @C("FI_READ")
  public static final long FI_READ = 1L << 8;

  /** {@code FI_WRITE}. */
  @C("FI_WRITE")
  public static final long FI_WRITE = 1L << 9;

  /** {@code FI_RECV} (a bind flag here). */
  @C("FI_RECV")
  public static final long FI_RECV = 1L << 10;

  /** {@code FI_TRANSMIT} (a bind flag here). */
  @C("FI_TRANSMIT")
  public static final long FI_TRANSMIT = 1L << 11;

  /** {@code FI_REMOTE_READ}. */
  @C("FI_REMOTE_READ")
  public static final long FI_REMOTE_READ = 1L << 12;

  /** {@code FI_REMOTE_WRITE}. */
  @C("FI_REMOTE_WRITE")
  public static final long FI_REMOTE_WRITE = 1L << 13;

  /** {@code FI_COMPLETION} (an operation flag). */
  @C("FI_COMPLETION")
  public static final long FI_COMPLETION = 1L << 24;

  /** {@code FI_DELIVERY_COMPLETE} (an operation flag). */
  @C("FI_DELIVERY_COMPLETE")
  public static final long FI_DELIVERY_COMPLETE = 1L << 28;

  /** {@code FI_SOURCE} (an {@code fi_getinfo} flag). */
  @C("FI_SOURCE")
  public static final long FI_SOURCE = 1L << 57;

  /**
   * {@code FI_PROV_ATTR_ONLY} (an {@code fi_getinfo} flag, alone): one entry per provider the
   * library holds, with only {@code prov_name} and {@code prov_version}, device or not ({@code
   * fi_info -l}).
   */
  @C("FI_PROV_ATTR_ONLY")
  public static final long FI_PROV_ATTR_ONLY = 1L << 54;

  /** {@code FI_NAME_MAX}: the longest name libfabric's own string buffers hold. */
  @C("FI_NAME_MAX")
  public static final int FI_NAME_MAX = 64;

  // ---- mode bits (fi_info.mode) ----

  /** {@code FI_CONTEXT} (mode). */
  @C("FI_CONTEXT")
  public static final long MODE_CONTEXT = 1L << 59;

  /** {@code FI_CONTEXT2} (mode). */
  @C("FI_CONTEXT2")
  public static final long MODE_CONTEXT2 = 1L << 52;

  // ---- mr_mode bits (fi_domain_attr.mr_mode, int) ----

  /** {@code FI_MR_BASIC}: legacy, means VIRT_ADDR, PROV_KEY and ALLOCATED. */
  @C("FI_MR_BASIC")
  public static final int MR_BASIC = 1;

  /** {@code FI_MR_SCALABLE}: legacy, means offsets and application keys. */
  @C("FI_MR_SCALABLE")
  public static final int MR_SCALABLE = 2;

  /** {@code FI_MR_LOCAL}. */
  @C("FI_MR_LOCAL")
  public static final int MR_LOCAL = 1 << 2;

  /** {@code FI_MR_RAW}: keys larger than 64 bits, which this binding cannot carry. */
  @C("FI_MR_RAW")
  public static final int MR_RAW = 1 << 3;

  /** {@code FI_MR_VIRT_ADDR}. */
  @C("FI_MR_VIRT_ADDR")
  public static final int MR_VIRT_ADDR = 1 << 4;

  /** {@code FI_MR_ALLOCATED}. */
  @C("FI_MR_ALLOCATED")
  public static final int MR_ALLOCATED = 1 << 5;

  /** {@code FI_MR_PROV_KEY}. */
  @C("FI_MR_PROV_KEY")
  public static final int MR_PROV_KEY = 1 << 6;

  /** {@code FI_MR_ENDPOINT}: MRs need {@code fi_mr_bind}, which this binding does not do. */
  @C("FI_MR_ENDPOINT")
  public static final int MR_ENDPOINT = 1 << 9;

  // ---- enums ----

  /** {@code FI_EP_RDM} ({@code fi_ep_attr.type}). */
  @C("FI_EP_RDM")
  public static final int FI_EP_RDM = 3;

  /** {@code FI_AV_TABLE} ({@code fi_av_attr.type}); not deprecated in 2.x, unlike FI_AV_MAP. */
  @C("FI_AV_TABLE")
  public static final int FI_AV_TABLE = 2;

  /** {@code FI_CQ_FORMAT_CONTEXT} ({@code fi_cq_attr.format}). */
  @C("FI_CQ_FORMAT_CONTEXT")
  public static final int FI_CQ_FORMAT_CONTEXT = 1;

  /** {@code FI_ENABLE} (an {@code fi_control} command). */
  @C("FI_ENABLE")
  public static final int FI_ENABLE = 6;

  /** {@code FI_SOCKADDR_IN} (address format). */
  @C("FI_SOCKADDR_IN")
  public static final int FI_SOCKADDR_IN = 2;

  /** {@code FI_SOCKADDR_IN6} (address format). */
  @C("FI_SOCKADDR_IN6")
  public static final int FI_SOCKADDR_IN6 = 3;

  /** {@code FI_ADDR_STR} (address format: a NUL-terminated URI such as shm's). */
  @C("FI_ADDR_STR")
  public static final int FI_ADDR_STR = 9;

  /** {@code FI_ADDR_NOTAVAIL}, also {@code FI_ADDR_UNSPEC}: never a valid peer. */
  @C("FI_ADDR_NOTAVAIL")
  public static final long FI_ADDR_NOTAVAIL = -1L;

  // ---- errors (positive; returned negated) ----
  // Every constant of dev.dma.api.Errno, the one home of these numbers, mirrored here so that
  // AbiTest checks each against the headers; the binding uses these names.
  /** {@code FI_EPERM}: operation not permitted. */
  @C("FI_EPERM")
  public static final int FI_EPERM = Errno.FI_EPERM;

  /** {@code FI_ENOENT}: no such entry (an unknown address; sockets' unconnectable peer). */
  @C("FI_ENOENT")
  public static final int FI_ENOENT = Errno.FI_ENOENT;

  /** {@code FI_EIO}: an I/O error (sockets fails every op of a closed peer with it). */
  @C("FI_EIO")
  public static final int FI_EIO = Errno.FI_EIO;

  /** {@code FI_EAGAIN}: not now; reap completions, then try again. */
  @C("FI_EAGAIN")
  public static final int FI_EAGAIN = Errno.FI_EAGAIN;

  /** {@code FI_ENOMEM}: out of memory, for example no more pinnable memory for a registration. */
  @C("FI_ENOMEM")
  public static final int FI_ENOMEM = Errno.FI_ENOMEM;

  /** {@code FI_EACCES}: permission denied (a bad remote key, bounds or access rights). */
  @C("FI_EACCES")
  public static final int FI_EACCES = Errno.FI_EACCES;

  /** {@code FI_EBUSY}: device or resource busy. */
  @C("FI_EBUSY")
  public static final int FI_EBUSY = Errno.FI_EBUSY;

  /** {@code FI_EINVAL}: an invalid argument. */
  @C("FI_EINVAL")
  public static final int FI_EINVAL = Errno.FI_EINVAL;

  /** {@code EPIPE}: broken pipe; libfabric defines no {@code FI_EPIPE}, providers report it raw. */
  @C("EPIPE")
  public static final int EPIPE = Errno.EPIPE;

  /** {@code FI_ENOSYS}: function not implemented. */
  @C("FI_ENOSYS")
  public static final int FI_ENOSYS = Errno.FI_ENOSYS;

  /** {@code FI_ENODATA}: no data available ({@code fi_getinfo} found no match). */
  @C("FI_ENODATA")
  public static final int FI_ENODATA = Errno.FI_ENODATA;

  /** {@code FI_EMSGSIZE}: message too long. */
  @C("FI_EMSGSIZE")
  public static final int FI_EMSGSIZE = Errno.FI_EMSGSIZE;

  /** {@code FI_EOPNOTSUPP}: operation not supported. */
  @C("FI_EOPNOTSUPP")
  public static final int FI_EOPNOTSUPP = Errno.FI_EOPNOTSUPP;

  /** {@code FI_ECONNABORTED}: connection aborted (EFA's unresponsive remote). */
  @C("FI_ECONNABORTED")
  public static final int FI_ECONNABORTED = Errno.FI_ECONNABORTED;

  /** {@code FI_ECONNRESET}: connection reset by peer. */
  @C("FI_ECONNRESET")
  public static final int FI_ECONNRESET = Errno.FI_ECONNRESET;

  /** {@code FI_ENOTCONN}: not connected (tcp after a peer closed; EFA's uninserted initiator). */
  @C("FI_ENOTCONN")
  public static final int FI_ENOTCONN = Errno.FI_ENOTCONN;

  /** {@code FI_ETIMEDOUT}: timed out. */
  @C("FI_ETIMEDOUT")
  public static final int FI_ETIMEDOUT = Errno.FI_ETIMEDOUT;

  /** {@code FI_ECONNREFUSED}: connection refused. */
  @C("FI_ECONNREFUSED")
  public static final int FI_ECONNREFUSED = Errno.FI_ECONNREFUSED;

  /** {@code FI_EHOSTDOWN}: host is down. */
  @C("FI_EHOSTDOWN")
  public static final int FI_EHOSTDOWN = Errno.FI_EHOSTDOWN;

  /** {@code FI_EHOSTUNREACH}: no route to host (EFA's unreachable remote). */
  @C("FI_EHOSTUNREACH")
  public static final int FI_EHOSTUNREACH = Errno.FI_EHOSTUNREACH;

  /** {@code FI_EREMOTEIO}: remote I/O error. */
  @C("FI_EREMOTEIO")
  public static final int FI_EREMOTEIO = Errno.FI_EREMOTEIO;

  /** {@code FI_ECANCELED}: canceled or flushed (tcp when the peer closed; EFA's FLUSHED). */
  @C("FI_ECANCELED")
  public static final int FI_ECANCELED = Errno.FI_ECANCELED;

  /** {@code FI_EKEYREJECTED}: key was rejected by service ({@code EKEYREJECTED}). */
  @C("FI_EKEYREJECTED")
  public static final int FI_EKEYREJECTED = Errno.FI_EKEYREJECTED;

  /** {@code FI_ERRNO_OFFSET}: libfabric's own codes start here; below it they are errno values. */
  @C("FI_ERRNO_OFFSET")
  public static final int FI_ERRNO_OFFSET = Errno.FI_ERRNO_OFFSET;

  /** {@code FI_EOTHER}: libfabric's unspecified error, the first of its own codes. */
  @C("FI_EOTHER")
  public static final int FI_EOTHER = Errno.FI_EOTHER;

  /** {@code FI_ETOOSMALL}: the buffer provided is too small ({@code fi_getname}). */
  @C("FI_ETOOSMALL")
  public static final int FI_ETOOSMALL = Errno.FI_ETOOSMALL;

  /** {@code FI_EAVAIL}: an error entry waits in the completion queue. */
  @C("FI_EAVAIL")
  public static final int FI_EAVAIL = Errno.FI_EAVAIL;

  /** {@code FI_ENOKEY}: a required key is not available (a requested MR key is taken). */
  @C("FI_ENOKEY")
  public static final int FI_ENOKEY = Errno.FI_ENOKEY;

  /** {@code FI_ENOAV}: missing or unavailable address vector. */
  @C("FI_ENOAV")
  public static final int FI_ENOAV = Errno.FI_ENOAV;

  /** {@code FI_ENORX}: receiver not ready, no receive buffers (EFA's RNR). */
  @C("FI_ENORX")
  public static final int FI_ENORX = Errno.FI_ENORX;

  // ---- libc ----

  /** {@code sizeof(struct sigaction)} (glibc x86_64). */
  @C("sizeof(struct sigaction)")
  public static final long SIGACTION_SIZE = 152;

  /** {@code SIGILL}. */
  @C("SIGILL")
  public static final int SIGILL = 4;

  /** {@code SIGBUS}. */
  @C("SIGBUS")
  public static final int SIGBUS = 7;

  /** {@code SIGFPE}. */
  @C("SIGFPE")
  public static final int SIGFPE = 8;

  /** {@code SIGSEGV}. */
  @C("SIGSEGV")
  public static final int SIGSEGV = 11;

  /** {@code AF_INET}: the family of an {@code FI_SOCKADDR_IN} address. */
  @C("AF_INET")
  public static final int AF_INET = 2;

  /** {@code AF_INET6}: the family of an {@code FI_SOCKADDR_IN6} address. */
  @C("AF_INET6")
  public static final int AF_INET6 = 10;

  /** {@code sockaddr_in.sin_family} (a native-endian 2-byte field). */
  @C("offsetof(struct sockaddr_in, sin_family)")
  public static final long SOCKADDR_FAMILY = 0;

  /** {@code sizeof(struct sockaddr_in)}. */
  @C("sizeof(struct sockaddr_in)")
  public static final long SOCKADDR_IN_SIZE = 16;

  /** {@code sizeof(struct sockaddr_in6)}. */
  @C("sizeof(struct sockaddr_in6)")
  public static final long SOCKADDR_IN6_SIZE = 28;
}

# Sourced by bin/test and bin/dma-bench: find which Debian packages a command needs that this
# machine lacks, and install them (root with apt-get) or say the one command that would.
#
# The checks look at the files themselves, not at dpkg's database: a package can be "installed"
# with its files gone, and the file is what the JVM and gcc need. They are cheap (no JVM, no
# network) so every run can afford them.
#
# Environment:
#   DMA_LIBFABRIC=/path/libfabric.so.1   the libfabric under test; the libfabric checks are skipped
#   DMA_SETUP_DRY_RUN=1                  as root, print the apt-get command instead of running it
#                                        and stop (exit 0); dev/fresh-machine-check.sh uses it

# Prints the packages (from: libfabric1 libfabric-dev libfabric-bin gcc maven) whose files are
# missing, one line, in the order asked.
dma_missing_packages() {
  local package missing=()
  for package in "$@"; do
    case "$package" in
      libfabric1)
        # Skipped when another libfabric is named: it need not be the system's.
        [[ -n "${DMA_LIBFABRIC:-}" ]] || dma_has_libfabric || missing+=("$package") ;;
      libfabric-dev)
        [[ -n "${DMA_LIBFABRIC:-}" || -s /usr/include/rdma/fabric.h ]] || missing+=("$package") ;;
      libfabric-bin)
        [[ -n "${DMA_LIBFABRIC:-}" ]] || dma_has_command fi_info || missing+=("$package") ;;
      gcc) dma_has_command gcc || missing+=("$package") ;;
      maven) dma_has_command mvn || missing+=("$package") ;;
      *) echo "requirements.sh: unknown package $package" >&2; return 2 ;;
    esac
  done
  echo "${missing[*]}"
}

# Whether the dynamic loader knows libfabric.so.1 and the file behind it is not empty.
dma_has_libfabric() {
  local path
  path=$(PATH="$PATH:/usr/sbin:/sbin" ldconfig -p 2>/dev/null \
    | awk '$1 == "libfabric.so.1" && /x86-64/ { print $NF; exit }')
  [[ -n "$path" && -s "$(readlink -f "$path")" ]]
}

# Whether $1 is an executable on the PATH and not an empty file.
dma_has_command() {
  local path
  path=$(command -v "$1" 2>/dev/null) && [[ -s "$(readlink -f "$path")" ]]
}

# Whether this process may install packages: root, with apt-get.
dma_can_install() {
  [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1
}

# The command a user runs to install the packages in $@.
dma_install_advice() {
  if command -v apt-get >/dev/null 2>&1; then
    echo "sudo apt-get install -y $*"
  else
    echo "install libfabric 1.17 or newer (library, headers, fi_info) and gcc with your package manager (Debian names: $*)"
  fi
}

# As root with apt-get: installs the packages in "$2 ..." saying so on one line prefixed with $1,
# then checks the files are there. Returns non-zero when they are still missing.
dma_install() {
  local who="$1"
  shift
  if [[ -n "${DMA_SETUP_DRY_RUN:-}" ]]; then
    echo "$who: would install $* (DMA_SETUP_DRY_RUN is set): apt-get update -qq && apt-get install -y -qq $*"
    exit 0
  fi
  echo "$who: installing $* (missing on this machine)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "$@" >/dev/null
  local still
  still=$(dma_missing_packages "$@")
  if [[ -n "$still" ]]; then
    # dpkg may think a package is installed while its files are gone; apt-get then does nothing.
    echo "$who: still missing after apt-get install: $still (try: apt-get install --reinstall $still)" >&2
    return 1
  fi
}

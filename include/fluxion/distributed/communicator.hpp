// fluxion::distributed::communicator: the processes of an MPI job, and the collectives that
// data-parallel training needs (all-reduce, broadcast), on fluxion tensors and variables.
//
//   fx::distributed::communicator comm{argc, argv};   // MPI_Init_thread, unless the program did it
//   auto total = comm.all_reduce(t);                  // the sum of every process's t
//   comm.broadcast(model.variables());                // every process gets process 0's values
//
// Every collective first checks that the processes agree on what they are about to exchange (the
// op, the shapes and element types): where they do not, every process throws the same
// fluxion::invalid_argument, naming each process's side, instead of exchanging buffers of
// different sizes (which MPI leaves undefined) or waiting forever. That check is one all-gather of
// 16 bytes per process per collective.
//
// The tensors are fluxion::cpu tensors: NCCL, and device buffers handed to a CUDA-aware MPI, are not
// built (README, "Departures from DESIGN.md").
//
// An exception that leaves a process while the others wait in a collective would leave them
// waiting: a communicator destroyed by an exception (stack unwinding) calls MPI_Abort, which ends
// every process of the job; a program that catches the exception itself calls abort().
#pragma once

// MPI's C API only: Open MPI's and MPICH's deprecated C++ bindings cost compile time and nothing uses them.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
// Without MPI's headers the include below fails with "mpi.h: No such file or directory", which
// names neither fluxion nor what to do about it.
#if defined(__has_include) && !__has_include(<mpi.h>)
#error "<fluxion/distributed.hpp> needs MPI (Open MPI or MPICH, e.g. Debian's libopenmpi-dev): link the CMake target fluxion::mpi, or compile with mpicxx"
#else  // the rest of the header only where MPI is, so that the message above is the only one
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "../tensor.hpp"

namespace fluxion::distributed {

/// What all_reduce combines the processes' values with.
enum class reduction { sum, mean, max, min };

namespace detail {

template <class T>
MPI_Datatype datatype() {
  if constexpr (std::is_same_v<T, float>) return MPI_FLOAT;
  else if constexpr (std::is_same_v<T, double>) return MPI_DOUBLE;
  else if constexpr (std::is_same_v<T, std::int32_t>) return MPI_INT32_T;
  else if constexpr (std::is_same_v<T, std::int64_t>) return MPI_INT64_T;
  else if constexpr (std::is_same_v<T, char>) return MPI_CHAR;
  else static_assert(sizeof(T) == 0, "fluxion::distributed: collectives take float, double, int32 or int64 tensors");
}

template <class Device>
constexpr void require_cpu() {
  static_assert(std::is_same_v<Device, cpu>,
                "fluxion::distributed: collectives take fluxion::cpu tensors and variables (NCCL is not built); "
                "copy device tensors with fluxion::to<fluxion::cpu> first");
}

inline std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(length));
}

/// Throws fluxion::error naming `op` where an MPI call failed.
inline void check_mpi(int code, const char* op) {
  if (code != MPI_SUCCESS) throw error(std::string(op) + ": " + mpi_error_text(code));
}

/// MPI_Finalize at the process's exit, where fluxion called MPI_Init_thread (a program that
/// initialized MPI itself finalizes it itself).
struct mpi_runtime {
  bool initialized_here = false;
  ~mpi_runtime() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (initialized_here && !finalized) MPI_Finalize();
  }
  static mpi_runtime& start(int* argc, char*** argv) {
    static mpi_runtime runtime;
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (finalized) throw error("distributed::communicator: MPI has been finalized; it cannot be started again in this process");
    if (!initialized) {
      int provided = 0;
      check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "distributed::communicator: MPI_Init_thread");
      runtime.initialized_here = true;
    }
    return runtime;
  }
};

/// 64-bit FNV-1a: what the processes compare before a collective.
inline std::uint64_t fingerprint(std::string_view text) {
  std::uint64_t h = 14695981039346656037ull;
  for (char c : text) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

template <class T>
std::string describe_shape(const fluxion::shape& s) {
  return std::string(dtype_name<T>()) + " " + to_string(s);
}

}  // namespace detail

/// The processes of an MPI job (a duplicate of MPI_COMM_WORLD, so that fluxion's messages never
/// meet the program's own). Not copyable; collectives are called by one thread of each process
/// (MPI_THREAD_FUNNELED), in the same order on every process.
class communicator {
 public:
  /// Starts MPI if the program has not (MPI_Init_thread with the program's arguments); MPI is
  /// finalized when the process exits.
  communicator(int& argc, char**& argv) { open(&argc, &argv); }
  communicator() { open(nullptr, nullptr); }
  communicator(const communicator&) = delete;
  communicator& operator=(const communicator&) = delete;
  ~communicator() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized || m_comm == MPI_COMM_NULL) return;
    if (std::uncaught_exceptions() > m_uncaught) {
      std::fprintf(stderr, "fluxion::distributed: process %d is leaving on an exception; aborting the job\n", m_rank);
      MPI_Abort(m_comm, 1);
    }
    MPI_Comm_free(&m_comm);
  }

  /// This process's number, from 0, and the number of processes.
  int rank() const noexcept { return m_rank; }
  int size() const noexcept { return m_size; }
  MPI_Comm native() const noexcept { return m_comm; }

  /// Waits until every process has called it.
  void barrier() const { detail::check_mpi(MPI_Barrier(m_comm), "distributed::barrier"); }

  /// Ends every process of the job with `code` (MPI_Abort).
  [[noreturn]] void abort(int code = 1) const {
    MPI_Abort(m_comm, code);
    std::abort();
  }

  /// Every process's `what` (its side of the collective `op` about to run) must be the same:
  /// otherwise every process throws the same fluxion::invalid_argument naming each one's side.
  /// Returns the bitwise or of every process's `flags` (a decision any process may make, such as
  /// stopping, carried by the same message).
  std::uint64_t agree(const char* op, const std::string& what, std::uint64_t flags = 0) const {
    const std::uint64_t mine[2] = {detail::fingerprint(what), flags};
    std::vector<std::uint64_t> all(2 * static_cast<std::size_t>(m_size));
    detail::check_mpi(MPI_Allgather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, m_comm), op);
    bool same = true;
    std::uint64_t any = 0;
    for (std::size_t r = 0; r < static_cast<std::size_t>(m_size); ++r) {
      same = same && all[2 * r] == mine[0];
      any |= all[2 * r + 1];
    }
    if (same) return any;
    // Every process saw the difference, so every one gathers the descriptions and throws.
    const int length = static_cast<int>(what.size());
    std::vector<int> lengths(static_cast<std::size_t>(m_size)), offsets(static_cast<std::size_t>(m_size));
    detail::check_mpi(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, m_comm), op);
    int total = 0;
    for (int r = 0; r < m_size; ++r) {
      offsets[static_cast<std::size_t>(r)] = total;
      total += lengths[static_cast<std::size_t>(r)];
    }
    std::string text(static_cast<std::size_t>(total), '\0');
    detail::check_mpi(MPI_Allgatherv(what.data(), length, MPI_CHAR, text.data(), lengths.data(), offsets.data(), MPI_CHAR, m_comm), op);
    std::string message = std::string(op) + ": the processes disagree on what to exchange:";
    for (int r = 0; r < m_size; ++r)
      message += std::string(r == 0 ? " " : "; ") + "process " + std::to_string(r) + ": " +
                 text.substr(static_cast<std::size_t>(offsets[static_cast<std::size_t>(r)]),
                             static_cast<std::size_t>(lengths[static_cast<std::size_t>(r)]));
    throw invalid_argument(message);
  }

  /// The elementwise sum (mean, max, min) of every process's `t`, on every process. The tensors
  /// must have the same shape and type everywhere.
  template <class T, class Device>
    requires std::is_same_v<Device, cpu>
  tensor<T, Device> all_reduce(const tensor<T, Device>& t, reduction op = reduction::sum) const {
    if (t.is_none()) throw invalid_argument("distributed::all_reduce: the tensor is none (a gradient that does not exist)");
    agree("distributed::all_reduce", reduction_name(op) + " of " + detail::describe_shape<T>(t.shape()));
    tensor<T, Device> out(t.shape());
    reduce(t.data(), out.mutable_data(), t.size(), op, "distributed::all_reduce");
    return out;
  }

  /// A double's sum (mean, max, min) over the processes, on every process.
  double all_reduce(double value, reduction op = reduction::sum) const {
    agree("distributed::all_reduce", reduction_name(op) + " of a double");
    reduce_in_place(&value, 1, op, "distributed::all_reduce");
    return value;
  }

  /// Process `root`'s `t`, on every process (whose own t gives the shape and type it expects).
  template <class T, class Device>
    requires std::is_same_v<Device, cpu>
  tensor<T, Device> broadcast(const tensor<T, Device>& t, int root = 0) const {
    check_root(root, "distributed::broadcast");
    agree("distributed::broadcast", "from process " + std::to_string(root) + ": " + detail::describe_shape<T>(t.shape()));
    tensor<T, Device> out(t.shape());
    std::copy(t.data(), t.data() + t.size(), out.mutable_data());
    detail::check_mpi(MPI_Bcast(out.mutable_data(), static_cast<int>(t.size()), detail::datatype<T>(), root, m_comm),
                      "distributed::broadcast");
    return out;
  }

  /// Assigns process `root`'s values to these variables on every process (Horovod's
  /// broadcast_variables): one message for all of them. The lists must match in number, names,
  /// shapes and types on every process.
  template <class T, class Device>
    requires std::is_same_v<Device, cpu>
  void broadcast(const std::vector<variable<T, Device>*>& variables, int root = 0) const {
    check_root(root, "distributed::broadcast");
    std::string what = "from process " + std::to_string(root) + ": " + std::to_string(variables.size()) + " variables";
    std::int64_t total = 0;
    for (std::size_t i = 0; i < variables.size(); ++i) {
      if (variables[i] == nullptr) throw invalid_argument("distributed::broadcast: variables[" + std::to_string(i) + "] is a null pointer");
      what += (i == 0 ? ": " : ", ") + variables[i]->name() + " " + detail::describe_shape<T>(variables[i]->shape());
      total += variables[i]->size();
    }
    agree("distributed::broadcast", what);
    std::vector<T> buffer(static_cast<std::size_t>(total));
    if (m_rank == root) {
      std::int64_t at = 0;
      for (const variable<T, Device>* v : variables) {
        std::copy(v->peek().data(), v->peek().data() + v->size(), buffer.data() + at);
        at += v->size();
      }
    }
    for_pieces(total, [&](std::int64_t at, int count) {
      detail::check_mpi(MPI_Bcast(buffer.data() + at, count, detail::datatype<T>(), root, m_comm), "distributed::broadcast");
    });
    if (m_rank == root) return;
    std::int64_t at = 0;
    for (variable<T, Device>* v : variables) {
      tensor<T, Device> value(v->shape());
      std::copy(buffer.data() + at, buffer.data() + at + v->size(), value.mutable_data());
      v->assign(value);
      at += v->size();
    }
  }

  /// Tensors and variables on other devices: a static_assert that says to copy them to the cpu.
  template <class T, class Device>
    requires(!std::is_same_v<Device, cpu>)
  tensor<T, Device> all_reduce(const tensor<T, Device>& t, reduction = reduction::sum) const {
    detail::require_cpu<Device>();
    return t;
  }
  template <class T, class Device>
    requires(!std::is_same_v<Device, cpu>)
  tensor<T, Device> broadcast(const tensor<T, Device>& t, int = 0) const {
    detail::require_cpu<Device>();
    return t;
  }
  template <class T, class Device>
    requires(!std::is_same_v<Device, cpu>)
  void broadcast(const std::vector<variable<T, Device>*>&, int = 0) const {
    detail::require_cpu<Device>();
  }

  /// Combines n elements at `data` in place over the processes (after the processes have agreed
  /// on them): for the layers above, which pack many tensors into one buffer.
  template <class T>
  void reduce_in_place(T* data, std::int64_t n, reduction op, const char* who) const {
    reduce(static_cast<const T*>(nullptr), data, n, op, who);
  }
  /// The same from n elements at `in` (not changed) into `out`; in place where `in` is null.
  template <class T>
  void reduce(const T* in, T* out, std::int64_t n, reduction op, const char* who) const {
    const MPI_Op mpi_op = op == reduction::max ? MPI_MAX : op == reduction::min ? MPI_MIN : MPI_SUM;
    for_pieces(n, [&](std::int64_t at, int count) {
      const void* send = in == nullptr ? MPI_IN_PLACE : static_cast<const void*>(in + at);
      detail::check_mpi(MPI_Allreduce(send, out + at, count, detail::datatype<T>(), mpi_op, m_comm), who);
    });
    T* const data = out;
    if (op == reduction::mean) {
      if constexpr (std::is_floating_point_v<T>) {
        const T scale = T(1) / static_cast<T>(m_size);
        for (std::int64_t i = 0; i < n; ++i) data[i] *= scale;
      } else {
        for (std::int64_t i = 0; i < n; ++i) data[i] /= static_cast<T>(m_size);
      }
    }
  }

 private:
  static std::string reduction_name(reduction op) {
    switch (op) {
      case reduction::sum: return "a sum";
      case reduction::mean: return "a mean";
      case reduction::max: return "a max";
      case reduction::min: return "a min";
    }
    return "a reduction";
  }
  void check_root(int root, const char* op) const {
    if (root < 0 || root >= m_size)
      throw out_of_range(std::string(op) + ": root = " + std::to_string(root) + " is not in [0, " + std::to_string(m_size) + ")");
  }
  /// MPI counts are ints: a buffer of more than 2^31 - 1 elements goes in pieces.
  template <class F>
  static void for_pieces(std::int64_t n, F&& f) {
    constexpr std::int64_t piece = std::int64_t{1} << 30;
    for (std::int64_t at = 0; at < n; at += piece) f(at, static_cast<int>(std::min(piece, n - at)));
  }
  void open(int* argc, char*** argv) {
    detail::mpi_runtime::start(argc, argv);
    detail::check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &m_comm), "distributed::communicator: MPI_Comm_dup");
    // Errors come back as codes, which check_mpi turns into exceptions (MPI's default aborts).
    MPI_Comm_set_errhandler(m_comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(m_comm, &m_rank);
    MPI_Comm_size(m_comm, &m_size);
    m_uncaught = std::uncaught_exceptions();
  }

  MPI_Comm m_comm = MPI_COMM_NULL;
  int m_rank = 0;
  int m_size = 1;
  int m_uncaught = 0;
};

}  // namespace fluxion::distributed

#endif  // __has_include(<mpi.h>)

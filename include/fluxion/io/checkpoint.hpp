// fx::checkpoint: saves and restores the state of a training run (models, optimizers with their
// slots, the step counter, random generators) as one safetensors file, like tf.train.Checkpoint.
//
//   auto net = fx::nn::sequential(fx::nn::input<784>{}, fx::nn::dense<128>{}, fx::nn::relu{}, fx::nn::dense<10>{});
//   fx::optim::adam opt{1e-3};
//   fx::variable<std::int64_t> step{fx::tensor<std::int64_t>(std::int64_t{0})};  // or a std::int64_t
//   fx::random::generator gen{42};
//   fx::checkpoint ckpt{{"model", net}, {"optimizer", opt}, {"step", step}, {"rng", gen}};
//   ckpt.save("ckpt/model");              // ckpt/model.safetensors, atomically
//   ckpt.restore("ckpt/model");           // checks every name, shape and dtype before assigning
//
//   fx::checkpoint_manager manager{ckpt, "ckpt", {.max_to_keep = 3}};
//   manager.save(1000);                   // ckpt/ckpt-1000.safetensors; older ones beyond 3 deleted
//   ckpt.restore(fx::latest_checkpoint("ckpt"));  // the highest step's file; none yet: nothing changes
//
// Tensor names in the file (Python's safetensors package reads them as they are):
// - a model (anything whose `variables()` returns std::vector<fx::variable<T, Device>*>): `<object>/<variable
//   name>`, e.g. `model/conv2d/kernel`; the model must be built (sequential models are; a layer
//   alone is built by its first call);
// - an optimizer: `<object>/<slot name>` (`optimizer/dense/kernel/momentum`) and `<object>/iterations`
//   (an I64 scalar). Where two trainable variables of the checkpoint's objects share a name (two
//   models whose layers have the same names), their slots are named by the variables' paths
//   instead, as TensorFlow names slots by object paths: `optimizer/decoder/dense/kernel/momentum`.
//   A constant learning rate is saved as `<object>/learning_rate` (an F64 scalar) and restored, as
//   Keras's optimizers keep theirs in a variable, so a rate that reduce_lr_on_plateau or a
//   learning_rate_scheduler changed survives a resumed run; an optimizer with a schedule saves none,
//   and restoring into one ignores the file's rate (the program's schedule wins); a file without one
//   (saved before stop 57) leaves the program's rate.
//   Its kind and other hyperparameters go in `__metadata__` (`optimizer/optimizer: adam`,
//   `optimizer/beta_1: 0.9` ...). They are recorded, not restored: the program constructs
//   its optimizer; restoring into an optimizer of another kind is refused;
// - a variable of any element type on any device, or a std::int64_t: `<object>` itself;
// - an fx::random::generator: `<object>/seed` and `<object>/offset` (I64 scalars holding the bits
//   of the unsigned values);
// - an object with `fx::state_fields checkpoint_state()` (core/state_fields.hpp: the counts of
//   fx::reduce_lr_on_plateau and fx::early_stopping, or a program's own callback): `<object>/<field>`
//   for each of its scalars (F64 or I64), and its labels (what it watches) as metadata
//   `<object>/<label>`, which restore() checks against the program's.
// Variables and optimizer slots on fx::cuda (where the device backend is compiled in, as for the
// optimizers' device updates) are saved from host copies and restored by uploading the file's
// values; the file does not record the device, so a run saved on a GPU restores on the cpu and the
// other way round.
// Learning-rate schedules keep no state (they are functions of the optimizer's iterations(), which
// is saved), so there is nothing of theirs to save.
//
// Restoring into an optimizer whose slots do not exist yet (a fresh program) creates them:
// restore() calls optimizer::build, after the whole file has been validated, for each trainable
// variable (float or double) of the checkpoint's models and variables whose slots the file holds;
// a variable without slots in the file (the saved optimizer had not trained it yet) gets none. The file is read and
// every name, dtype and shape checked against the objects before anything is assigned, so a
// refused file leaves every object as it was; the first mismatch is named:
//   checkpoint::restore: 'ckpt/model.safetensors': 'model/dense/kernel' has shape (784, 128) in the
//   file, (784, 256) in the model
// Names missing from the file, and names in the file that no object has, are errors unless
// restore_options::allow_partial is set (then they are left as they are, and ignored).
#pragma once

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <typeindex>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "../core/state_fields.hpp"
#include "../optim/adadelta.hpp"
#include "../optim/adagrad.hpp"
#include "../optim/adam.hpp"
#include "../optim/adamax.hpp"
#include "../optim/lion.hpp"
#include "../optim/nadam.hpp"
#include "../optim/optimizer.hpp"
#include "../optim/rmsprop.hpp"
#include "../optim/sgd.hpp"
#include "../tensor.hpp"
#include "../tensor/random.hpp"
#include "file.hpp"
#include "prebuilt.hpp"
#include "safetensors.hpp"

namespace fluxion {

/// How checkpoint::restore treats names that the file and the objects do not share.
struct restore_options {
  /// Leave objects' tensors that the file lacks as they are, and ignore the file's extra tensors.
  bool allow_partial = false;
};

namespace detail {

template <class V>
inline constexpr bool is_variable_pointer_vector_v = false;
template <class T, class Device>
inline constexpr bool is_variable_pointer_vector_v<std::vector<variable<T, Device>*>> = true;

template <class V>
inline constexpr bool is_variable_v = false;
template <class T, class Device>
inline constexpr bool is_variable_v<variable<T, Device>> = true;

/// A model: anything with `variables()` returning std::vector<fx::variable<T, Device>*>.
template <class M>
concept checkpointable_model = requires(M& m) { m.variables(); } && is_variable_pointer_vector_v<decltype(std::declval<M&>().variables())>;

/// An object that keeps scalars between epochs (a callback's counts): core/state_fields.hpp.
template <class O>
concept has_checkpoint_state = requires(O& o) {
  { o.checkpoint_state() } -> std::same_as<state_fields>;
};

/// The devices whose variables and optimizer slots a checkpoint saves: fx::cuda where the device
/// backend is compiled in (as for the optimizers' device updates).
#if FLUXION_DEVICE_OPTIMIZERS
using checkpoint_devices = std::tuple<cpu, cuda>;
#else
using checkpoint_devices = std::tuple<cpu>;
#endif

template <class F>
void for_each_checkpoint_slot_type(F&& f) {
  [&]<class... D>(std::tuple<D...>*) {
    (f.template operator()<float, D>(), ...);
    (f.template operator()<double, D>(), ...);
  }(static_cast<checkpoint_devices*>(nullptr));
}

/// A trainable variable of a checkpoint's model or variable object, and its path there.
struct owned_variable {
  std::uint64_t id;
  std::string name;  // the variable's own name (its slots' prefix)
  std::string path;  // `<object>/<name>` for a model's variable, `<object>` for a variable object
};

/// How a checkpoint names an optimizer's slots: by their variable (`optimizer/dense/kernel/momentum`),
/// unless another trainable variable of the checkpoint's objects has the same name (two models whose
/// layers have the same names); then by the variable's path in the checkpoint
/// (`optimizer/decoder/dense/kernel/momentum`), as TensorFlow names slots by object paths.
struct slot_names {
  std::map<std::uint64_t, std::string> qualified;  // variable id -> path, for the shared names

  static slot_names of(const std::vector<owned_variable>& owned) {
    std::map<std::string, std::set<std::uint64_t>> ids;  // the same variable twice counts once
    for (const auto& v : owned) ids[v.name].insert(v.id);
    slot_names out;
    for (const auto& v : owned)
      if (ids[v.name].size() > 1) out.qualified.emplace(v.id, v.path);
    return out;
  }
  /// The slot's name in the file, below the optimizer's: `plain` (`<variable>/<slot>`) or
  /// `<path>/<slot>`.
  std::string key(std::uint64_t variable_id, const std::string& plain, const std::string& slot) const {
    const auto it = qualified.find(variable_id);
    return it == qualified.end() ? plain : it->second + "/" + slot;
  }
};

/// The state restore() builds before assigning anything.
struct restore_context {
  const io::safetensors& file;
  const std::string& path;
  restore_options options;
  std::set<std::string> claimed = {};  // names some object expects
  /// The trainable variables of the checkpoint's models and variables, by element type and device
  /// (std::vector<variable<T, Device>*>): an optimizer builds slots for them.
  std::map<std::type_index, std::shared_ptr<void>> trainables = {};
  slot_names slots = {};

  template <class T, class Device>
  std::vector<variable<T, Device>*>& trainables_of() {
    auto& p = trainables[std::type_index(typeid(variable<T, Device>))];
    if (!p) p = std::make_shared<std::vector<variable<T, Device>*>>();
    return *static_cast<std::vector<variable<T, Device>*>*>(p.get());
  }
};

[[noreturn]] void restore_fail(const restore_context& c, const std::string& what);

/// The tensor `name` of the file as a tensor<T> of shape `expected`, or nullopt when it is absent
/// and partial restores are allowed. `where` says whose it is ("the model").
template <element_type T>
std::optional<tensor<T>> take(restore_context& c, const std::string& name, const shape& expected, const std::string& where) {
  if (!c.claimed.insert(name).second)
    restore_fail(c, "two objects expect a tensor named '" + name + "'; give the objects distinct names");
  const io::safetensors_tensor* t = c.file.find(name);
  if (t == nullptr) {
    if (c.options.allow_partial) return std::nullopt;
    restore_fail(c, "'" + name + "' is missing from the file (" + where +
                        " has it; pass restore_options{.allow_partial = true} to restore what the file has)");
  }
  constexpr io::safetensors_dtype d = io::safetensors_dtype_of<T>();
  if (t->dtype() != d)
    restore_fail(c, "'" + name + "' has dtype " + io::safetensors_dtype_name(t->dtype()) + " in the file, " +
                        io::safetensors_dtype_name(d) + " (" + dtype_name<T>() + ") in " + where);
  if (t->shape() != expected)
    restore_fail(c, "'" + name + "' has shape " + to_string(t->shape()) + " in the file, " + to_string(expected) +
                        " in " + where);
  return io::safetensors::decode<T>(*t);
}

template <class Tensor>
FLUXION_IO_TEMPLATE_INLINE void add_unique(io::safetensors& file, std::set<std::string>& names, const std::string& name, const Tensor& t) {
  if (!names.insert(name).second)
    throw invalid_argument("checkpoint::save: two tensors are named '" + name +
                           "'; give the objects (or the variables) distinct names");
  file.add(name, t);
}

/// The shortest text that reads back as the hyperparameter: optim's own formatter.
using optim::detail::format_number;

/// The optimizer's kind and hyperparameters, as metadata.
std::vector<std::pair<std::string, std::string>> hyperparameters(const optim::optimizer& o);

}  // namespace detail

/// One named object of a checkpoint: a reference to a model, an optimizer, a variable, a
/// std::int64_t, a random generator or an object with checkpoint_state() (a callback); the object
/// must outlive the checkpoint.
class checkpoint_object {
 public:
  template <class Object>
  checkpoint_object(std::string name, Object& object);  // NOLINT: {"model", net}

  // Declared here and defined with the other non-template code, so that a program with prebuilt
  // I/O does not compile the std::function copies and destructors (io/prebuilt.hpp).
  checkpoint_object(const checkpoint_object& other);
  checkpoint_object(checkpoint_object&& other) noexcept;
  checkpoint_object& operator=(const checkpoint_object& other);
  checkpoint_object& operator=(checkpoint_object&& other) noexcept;
  ~checkpoint_object();

  const std::string& name() const noexcept { return m_name; }
  /// "model", "optimizer", "variable", "integer", "generator" or "state".
  const std::string& kind() const noexcept { return m_kind; }

 private:
  friend class checkpoint;
  using commit_function = std::function<void()>;

  // Variables on a device are saved from host copies, and restored by uploading the file's values
  // (checked first, on the host, like every other).
  template <class M>
  void bind_model(M& m);

  template <class T, class Device>
  void bind_variable(variable<T, Device>& v);

  // bind_integer, bind_generator and bind_optimizer are templates, though each takes one type, so
  // that the statements and kernels their bodies use (slots of every element type, int64 tensors)
  // are instantiated only in programs that checkpoint such an object, not in every file that
  // includes the umbrella header (0.4 s of its 2.1 s, measured).
  template <class Integer>
  void bind_integer(Integer& n);

  template <class Generator>
  void bind_generator(Generator& g);

  template <class Optimizer>
  void bind_optimizer(Optimizer& derived);

  /// An object's checkpoint_state(), taken once: its pointers stay valid as long as the object.
  void bind_state(state_fields fields);

  /// Checks the slots the optimizer has, and those build() will create for `trainables`, against
  /// the file; the commit creates the missing slots, then assigns.
  template <class T, class Device>
  static commit_function plan_slots(const std::string& name, optim::optimizer& o, detail::restore_context& c,
                                    const std::vector<variable<T, Device>*>& trainables);

  std::string m_name;
  std::string m_kind;
  std::function<void(io::safetensors&, std::set<std::string>&, const detail::slot_names&)> m_save;
  std::function<void(detail::restore_context&)> m_trainables;
  std::function<void(std::vector<detail::owned_variable>&)> m_owned;  // models and variables
  std::function<commit_function(detail::restore_context&)> m_plan;
};

/// Saves and restores a set of named objects as one safetensors file.
class checkpoint {
 public:
  checkpoint(std::initializer_list<checkpoint_object> objects);

  const std::vector<checkpoint_object>& objects() const noexcept { return m_objects; }

  /// `path` with ".safetensors" appended unless it ends with it: the file save and restore use.
  static std::string file_name(const std::string& path);

  /// The objects' state as safetensors: what save() writes.
  io::safetensors to_safetensors() const;

  /// Writes every object to file_name(path) atomically (a temporary file in the same directory,
  /// fsync, rename, fsync of the directory), creating the directory if needed. Returns the path.
  std::string save(const std::string& path) const;
  /// The same for `contents`: to_safetensors() with metadata of the caller's (best_checkpoint_callback's).
  std::string save(const std::string& path, const io::safetensors& contents) const;

  /// Reads and validates file_name(path), checks it against every object, then assigns. Throws
  /// fluxion::io_error, with nothing changed, when the file or any name, shape or dtype is wrong.
  std::string restore(const std::string& path, restore_options options = {});
  /// TensorFlow's `ckpt.restore(manager.latest_checkpoint)`, for the optional path that
  /// fx::latest_checkpoint and checkpoint_manager::latest give: restores it when there is one, and
  /// changes nothing when there is none (a first run, where TensorFlow's restore(None) keeps the
  /// initial values too). Returns the file restored, or nullopt. A template, so that a string
  /// literal still takes the overload above rather than being ambiguous between the two.
  template <class Path>
    requires std::is_same_v<Path, std::optional<std::string>>
  std::optional<std::string> restore(const Path& path, restore_options options = {}) {
    if (!path) return std::nullopt;
    return restore(*path, options);
  }
  /// Restores from tensors already read; `source` names them in errors.
  void restore(const io::safetensors& file, restore_options options = {}, const std::string& source = {});

 private:
  std::string unbuilt_hint(const std::string& name) const;
  detail::slot_names slot_keys() const;

  std::vector<checkpoint_object> m_objects;
};

/// The checkpoints `<prefix>-<step>.safetensors` in `directory`, sorted by step (then by name); with
/// an empty prefix, any prefix. Temporary files of saves in progress never match. A missing
/// directory has none.
std::vector<std::pair<std::int64_t, std::string>> list_checkpoints(const std::string& directory,
                                                                   const std::string& prefix = {});

/// The checkpoint of `directory` with the highest step (by the number in its name, not by the
/// file's time), or nullopt when there is none.
std::optional<std::string> latest_checkpoint(const std::string& directory, const std::string& prefix = {});

struct checkpoint_manager_options {
  /// How many checkpoints to keep, the highest steps; 0 keeps all.
  int max_to_keep = 5;
  /// Files are `<prefix>-<step>.safetensors`.
  std::string prefix = "ckpt";
};

/// Numbered checkpoints in one directory, keeping the newest max_to_keep (tf.train.CheckpointManager).
class checkpoint_manager {
 public:
  checkpoint_manager(checkpoint& ckpt, std::string directory, checkpoint_manager_options options = {});
  /// TensorFlow's positional form: CheckpointManager(checkpoint, directory, max_to_keep).
  checkpoint_manager(checkpoint& ckpt, std::string directory, int max_to_keep)
      : checkpoint_manager(ckpt, std::move(directory), checkpoint_manager_options{.max_to_keep = max_to_keep}) {}

  const std::string& directory() const noexcept { return m_directory; }

  /// Saves `<directory>/<prefix>-<step>.safetensors` atomically; once it is in place, deletes the
  /// checkpoints of lowest step beyond max_to_keep (never the one just written). Returns its path.
  std::string save(std::int64_t step);

  /// This manager's checkpoints, sorted by step.
  std::vector<std::pair<std::int64_t, std::string>> checkpoints() const;
  std::optional<std::string> latest() const;

  /// Restores the latest checkpoint, if there is one, and returns its path.
  std::optional<std::string> restore_latest(restore_options options = {});

 private:
  checkpoint* m_checkpoint;
  std::string m_directory;
  checkpoint_manager_options m_options;
};


// checkpoint_object's templates, outside the class so that programs with prebuilt I/O can declare
// the common ones `extern template` (below, and io/prebuilt.hpp).
template <class Object>
FLUXION_IO_TEMPLATE_INLINE checkpoint_object::checkpoint_object(std::string name, Object& object) : m_name(std::move(name)) {
  if (m_name.empty()) throw invalid_argument("checkpoint: an object's name must not be empty");
  if constexpr (std::is_base_of_v<optim::optimizer, Object>) {
    bind_optimizer(object);
  } else if constexpr (detail::is_variable_v<Object>) {
    bind_variable(object);
  } else if constexpr (std::is_same_v<Object, std::int64_t>) {
    bind_integer(object);
  } else if constexpr (std::is_same_v<Object, random::generator>) {
    bind_generator(object);
  } else if constexpr (detail::checkpointable_model<Object>) {
    bind_model(object);
  } else if constexpr (detail::has_checkpoint_state<Object>) {
    bind_state(object.checkpoint_state());
  } else {
    static_assert(detail::checkpointable_model<Object>,
                  "fluxion::checkpoint: an object must be a model (with variables() returning "
                  "std::vector<fluxion::variable<T, Device>*>), an optimizer, a fluxion::variable, a "
                  "std::int64_t, a fluxion::random::generator, or an object with a member "
                  "`fluxion::state_fields checkpoint_state()` (fluxion::reduce_lr_on_plateau, "
                  "fluxion::early_stopping). Learning-rate schedules keep no state: save the optimizer, "
                  "whose iterations() they follow.");
  }
}

template <class M>
FLUXION_IO_TEMPLATE_INLINE void checkpoint_object::bind_model(M& m) {
  using pointers = decltype(m.variables());
  using V = std::remove_pointer_t<typename pointers::value_type>;
  using T = typename V::value_type;
  using Device = typename V::device_type;
  m_kind = "model";
  m_save = [name = m_name, &m](io::safetensors& file, std::set<std::string>& names, const detail::slot_names&) {
    for (auto* v : m.variables()) detail::add_unique(file, names, name + "/" + v->name(), detail::host_copy(v->peek()));
  };
  m_owned = [name = m_name, &m](std::vector<detail::owned_variable>& out) {
    for (auto* v : m.variables())
      if (v->trainable()) out.push_back({v->id(), v->name(), name + "/" + v->name()});
  };
  m_trainables = [&m](detail::restore_context& c) {
    for (auto* v : m.variables())
      if (v->trainable()) c.trainables_of<T, Device>().push_back(v);
  };
  m_plan = [name = m_name, &m](detail::restore_context& c) -> commit_function {
    std::vector<std::pair<V*, tensor<T>>> values;
    for (auto* v : m.variables())
      if (auto t = detail::take<T>(c, name + "/" + v->name(), v->shape(), "the model")) values.emplace_back(v, std::move(*t));
    return [values = std::move(values)] {
      for (const auto& [v, t] : values) v->assign(detail::device_copy<Device>(t));
    };
  };
}

template <class T, class Device>
FLUXION_IO_TEMPLATE_INLINE void checkpoint_object::bind_variable(variable<T, Device>& v) {
  m_kind = "variable";
  m_save = [name = m_name, &v](io::safetensors& file, std::set<std::string>& names, const detail::slot_names&) {
    detail::add_unique(file, names, name, detail::host_copy(v.peek()));
  };
  m_owned = [name = m_name, &v](std::vector<detail::owned_variable>& out) {
    if (v.trainable()) out.push_back({v.id(), v.name(), name});
  };
  m_trainables = [&v](detail::restore_context& c) {
    if (v.trainable()) c.trainables_of<T, Device>().push_back(&v);
  };
  m_plan = [name = m_name, &v](detail::restore_context& c) -> commit_function {
    auto t = detail::take<T>(c, name, v.shape(), "the variable");
    if (!t) return [] {};
    return [&v, value = std::move(*t)] { v.assign(detail::device_copy<Device>(value)); };
  };
}

template <class Integer>
FLUXION_IO_TEMPLATE_INLINE void checkpoint_object::bind_integer(Integer& n) {
  m_kind = "integer";
  m_save = [name = m_name, &n](io::safetensors& file, std::set<std::string>& names, const detail::slot_names&) {
    detail::add_unique(file, names, name, tensor<std::int64_t>(n));
  };
  m_plan = [name = m_name, &n](detail::restore_context& c) -> commit_function {
    auto t = detail::take<std::int64_t>(c, name, shape{}, "the program (a std::int64_t)");
    if (!t) return [] {};
    return [&n, value = t->data()[0]] { n = value; };
  };
}

template <class Generator>
FLUXION_IO_TEMPLATE_INLINE void checkpoint_object::bind_generator(Generator& g) {
  m_kind = "generator";
  m_save = [name = m_name, &g](io::safetensors& file, std::set<std::string>& names, const detail::slot_names&) {
    detail::add_unique(file, names, name + "/seed", tensor<std::int64_t>(std::bit_cast<std::int64_t>(g.seed())));
    detail::add_unique(file, names, name + "/offset", tensor<std::int64_t>(std::bit_cast<std::int64_t>(g.offset())));
  };
  m_plan = [name = m_name, &g](detail::restore_context& c) -> commit_function {
    auto seed = detail::take<std::int64_t>(c, name + "/seed", shape{}, "the generator");
    auto offset = detail::take<std::int64_t>(c, name + "/offset", shape{}, "the generator");
    if (seed.has_value() != offset.has_value())
      detail::restore_fail(c, "generator '" + name + "' needs both '" + name + "/seed' and '" + name +
                                  "/offset', the file has only one");
    if (!seed) return [] {};
    return [&g, s = std::bit_cast<std::uint64_t>(seed->data()[0]), o = std::bit_cast<std::uint64_t>(offset->data()[0])] {
      g.reset(s);
      g.skip(o);
    };
  };
}

template <class Optimizer>
FLUXION_IO_TEMPLATE_INLINE void checkpoint_object::bind_optimizer(Optimizer& derived) {
  optim::optimizer& o = derived;
  m_kind = "optimizer";
  m_save = [name = m_name, &o](io::safetensors& file, std::set<std::string>& names, const detail::slot_names& keys) {
    std::set<std::string> slots;
    detail::for_each_checkpoint_slot_type([&]<class T, class Device>() {
      for (auto& s : o.slots_by_variable<T, Device>()) {
        const std::string slot = keys.key(s.variable_id, s.value->name(), s.slot);
        // Two variables of one name (two models whose layers have the same names) that the
        // checkpoint cannot tell apart by path: one of them is not among its objects.
        if (!slots.insert(slot).second) {
          const std::string variable = slot.substr(0, slot.rfind('/'));
          throw invalid_argument("checkpoint::save: optimizer '" + name + "' trains two variables named '" + variable +
                                 "', so both would save a slot named '" + name + "/" + slot +
                                 "'; add the model the other belongs to to the checkpoint (the slots of variables "
                                 "that share a name are then named by their objects: '" + name + "/<object>/" +
                                 variable + "/" + s.slot + "'), or name its layers (nn::dense<10>{\"encoder_dense\"})");
        }
        detail::add_unique(file, names, name + "/" + slot, detail::host_copy(s.value->peek()));
      }
    });
    detail::add_unique(file, names, name + "/iterations", tensor<std::int64_t>(o.iterations()));
    // The update count where it is not the call count (gradient accumulation): a run resumed with
    // other accumulation steps keeps its schedule and bias correction where they were.
    if (o.gradient_accumulation_steps() > 1 || o.updates() != o.iterations())
      detail::add_unique(file, names, name + "/updates", tensor<std::int64_t>(o.updates()));
    // A constant rate is state a callback may change (reduce_lr_on_plateau, learning_rate_scheduler),
    // as Keras's optimizers hold it in a variable; a schedule is a function of iterations().
    if (o.learning_rate_schedule().is_constant())
      detail::add_unique(file, names, name + "/learning_rate", tensor<double>(o.learning_rate()));
    for (const auto& [key, value] : detail::hyperparameters(o)) file.set_metadata(name + "/" + key, value);
  };
  m_plan = [name = m_name, &o](detail::restore_context& c) -> commit_function {
    if (const std::string* kind = c.file.find_metadata(name + "/optimizer"); kind && *kind != o.name())
      detail::restore_fail(c, "'" + name + "' is an optimizer of kind " + *kind + " in the file, " + o.name() +
                                  " in the program");
    std::vector<commit_function> slots;
    detail::for_each_checkpoint_slot_type([&]<class T, class Device>() {
      slots.push_back(plan_slots<T, Device>(name, o, c, c.trainables_of<T, Device>()));
    });
    auto iterations = detail::take<std::int64_t>(c, name + "/iterations", shape{}, "the optimizer");
    if (iterations && iterations->data()[0] < 0)
      detail::restore_fail(c, "'" + name + "/iterations' = " + std::to_string(iterations->data()[0]) +
                                  " is negative");
    // Optional: files without gradient accumulation have none (the count is then the calls').
    std::optional<std::int64_t> updates;
    if (c.file.find(name + "/updates") != nullptr) {
      updates = detail::take<std::int64_t>(c, name + "/updates", shape{}, "the optimizer")->data()[0];
      if (*updates < 0)
        detail::restore_fail(c, "'" + name + "/updates' = " + std::to_string(*updates) + " is negative");
    }
    // Optional: files saved before stop 57, or with a schedule, have no rate; the program's stays.
    std::optional<double> rate;
    if (c.file.find(name + "/learning_rate") != nullptr) {
      const double r = detail::take<double>(c, name + "/learning_rate", shape{}, "the optimizer")->data()[0];
      if (!(std::isfinite(r) && r >= 0))
        detail::restore_fail(c, "'" + name + "/learning_rate' = " + optim::detail::format_number(r) +
                                    " must be finite and non-negative");
      if (o.learning_rate_schedule().is_constant()) rate = r;  // a program's schedule wins
    }
    return [&o, slots = std::move(slots), n = iterations ? std::optional<std::int64_t>(iterations->data()[0]) : std::nullopt,
            updates, rate] {
      for (const auto& commit : slots) commit();
      if (n) o.set_iterations(*n);
      // A file without the update count was saved where it equals the call count.
      if (updates || n) o.set_updates(updates ? *updates : *n);
      if (rate) o.set_learning_rate(*rate);
    };
  };
}

template <class T, class Device>
FLUXION_IO_TEMPLATE_INLINE checkpoint_object::commit_function checkpoint_object::plan_slots(const std::string& name, optim::optimizer& o,
                                                                 detail::restore_context& c,
                                                                 const std::vector<variable<T, Device>*>& trainables) {
  std::map<std::string, shape> expected;  // slot name -> shape
  std::vector<std::string> order;
  for (auto& slot : o.slots_by_variable<T, Device>()) {
    const std::string key = c.slots.key(slot.variable_id, slot.value->name(), slot.slot);
    if (expected.emplace(key, slot.value->shape()).second) order.push_back(key);
  }
  const auto specs = o.slot_specs();
  std::vector<variable<T, Device>*> to_build;
  for (auto* v : trainables) {
    if (specs.empty() || o.get_slot(*v, specs.front().name) != nullptr) continue;
    // A variable the saved optimizer had no slots for (it had not trained it yet) gets none.
    const std::string prefix = v->name().empty() ? "variable_" + std::to_string(v->id()) : v->name();
    auto key = [&](const std::string& slot) { return c.slots.key(v->id(), prefix + "/" + slot, slot); };
    bool in_file = false;
    for (const auto& spec : specs) in_file = in_file || c.file.contains(name + "/" + key(spec.name));
    if (!in_file) continue;
    to_build.push_back(v);
    for (const auto& spec : specs)
      if (expected.emplace(key(spec.name), v->shape()).second) order.push_back(key(spec.name));
  }
  // A gradient accumulator the file lacks (saved without gradient accumulation) starts from zero.
  constexpr std::string_view accumulator = "/gradient_accumulator";
  std::map<std::string, tensor<T>> values;
  for (const auto& slot : order) {
    if (slot.ends_with(accumulator) && !c.file.contains(name + "/" + slot)) continue;
    if (auto t = detail::take<T>(c, name + "/" + slot, expected.at(slot), "the optimizer")) values.emplace(slot, std::move(*t));
  }
  return [&o, to_build = std::move(to_build), values = std::move(values), keys = c.slots] {
    o.build(to_build);
    for (auto& slot : o.slots_by_variable<T, Device>()) {
      if (const auto it = values.find(keys.key(slot.variable_id, slot.value->name(), slot.slot)); it != values.end())
        slot.value->assign(detail::device_copy<Device>(it->second));
      else if (slot.slot == "gradient_accumulator")
        slot.value->assign(zeros<T, Device>(slot.value->shape()));
    }
  };
}

#if FLUXION_IO_DEFINITIONS
// In src/io.cpp where the program uses prebuilt kernels (io/prebuilt.hpp); inline otherwise.
namespace detail {
[[noreturn]] FLUXION_IO_INLINE void restore_fail(const restore_context& c, const std::string& what) {
  throw io_error("checkpoint::restore: '" + c.path + "': " + what);
}

FLUXION_IO_INLINE std::vector<std::pair<std::string, std::string>> hyperparameters(const optim::optimizer& o) {
  std::vector<std::pair<std::string, std::string>> h{{"optimizer", o.name()}};
  h.emplace_back("learning_rate", o.learning_rate_schedule().is_constant() ? format_number(o.learning_rate())
                                                                            : "schedule (now " + format_number(o.learning_rate()) + ")");
  h.emplace_back("weight_decay", format_number(o.weight_decay()));
  if (o.clipnorm() != 0) h.emplace_back("clipnorm", format_number(o.clipnorm()));
  if (o.clipvalue() != 0) h.emplace_back("clipvalue", format_number(o.clipvalue()));
  if (o.global_clipnorm() != 0) h.emplace_back("global_clipnorm", format_number(o.global_clipnorm()));
  if (o.use_ema()) {
    h.emplace_back("use_ema", "true");
    h.emplace_back("ema_momentum", format_number(o.ema_momentum()));
    h.emplace_back("ema_overwrite_frequency", std::to_string(o.ema_overwrite_frequency()));
  }
  if (o.gradient_accumulation_steps() > 1)
    h.emplace_back("gradient_accumulation_steps", std::to_string(o.gradient_accumulation_steps()));
  if (const auto* a = dynamic_cast<const optim::adam*>(&o)) {
    h.emplace_back("beta_1", format_number(a->beta_1()));
    h.emplace_back("beta_2", format_number(a->beta_2()));
    h.emplace_back("epsilon", format_number(a->epsilon()));
    h.emplace_back("amsgrad", a->amsgrad() ? "true" : "false");
  } else if (const auto* s = dynamic_cast<const optim::sgd*>(&o)) {
    h.emplace_back("momentum", format_number(s->momentum()));
    h.emplace_back("nesterov", s->nesterov() ? "true" : "false");
  } else if (const auto* r = dynamic_cast<const optim::rmsprop*>(&o)) {
    h.emplace_back("rho", format_number(r->rho()));
    h.emplace_back("momentum", format_number(r->momentum()));
    h.emplace_back("epsilon", format_number(r->epsilon()));
    h.emplace_back("centered", r->centered() ? "true" : "false");
  } else if (const auto* g = dynamic_cast<const optim::adagrad*>(&o)) {
    h.emplace_back("initial_accumulator_value", format_number(g->initial_accumulator_value()));
    h.emplace_back("epsilon", format_number(g->epsilon()));
  } else if (const auto* x = dynamic_cast<const optim::adamax*>(&o)) {
    h.emplace_back("beta_1", format_number(x->beta_1()));
    h.emplace_back("beta_2", format_number(x->beta_2()));
    h.emplace_back("epsilon", format_number(x->epsilon()));
  } else if (const auto* n = dynamic_cast<const optim::nadam*>(&o)) {
    h.emplace_back("beta_1", format_number(n->beta_1()));
    h.emplace_back("beta_2", format_number(n->beta_2()));
    h.emplace_back("epsilon", format_number(n->epsilon()));
  } else if (const auto* d = dynamic_cast<const optim::adadelta*>(&o)) {
    h.emplace_back("rho", format_number(d->rho()));
    h.emplace_back("epsilon", format_number(d->epsilon()));
  } else if (const auto* l = dynamic_cast<const optim::lion*>(&o)) {
    h.emplace_back("beta_1", format_number(l->beta_1()));
    h.emplace_back("beta_2", format_number(l->beta_2()));
  }
  return h;
}
}  // namespace detail

FLUXION_IO_INLINE void checkpoint_object::bind_state(state_fields fields) {
  m_kind = "state";
  std::set<std::string> fields_seen;
  auto distinct = [&](const std::string& field) {
    if (field.empty() || !fields_seen.insert(field).second)
      throw invalid_argument("checkpoint: object '" + m_name + "': its checkpoint_state() has " +
                             (field.empty() ? std::string("a field without a name") : "two fields named '" + field + "'"));
  };
  for (const auto& r : fields.reals) distinct(r.name);
  for (const auto& i : fields.integers) distinct(i.name);
  auto state = std::make_shared<const state_fields>(std::move(fields));
  m_save = [name = m_name, state](io::safetensors& file, std::set<std::string>& names, const detail::slot_names&) {
    for (const auto& r : state->reals) detail::add_unique(file, names, name + "/" + r.name, tensor<double>(r.negated ? -*r.value : *r.value));
    for (const auto& i : state->integers)
      detail::add_unique(file, names, name + "/" + i.name, tensor<std::int64_t>(static_cast<std::int64_t>(*i.value)));
    for (const auto& [key, value] : state->labels) file.set_metadata(name + "/" + key, value);
  };
  m_plan = [name = m_name, state](detail::restore_context& c) -> commit_function {
    for (const auto& [key, value] : state->labels) {
      const std::string* saved = c.file.find_metadata(name + "/" + key);
      if (saved != nullptr && *saved == value) continue;
      if (saved == nullptr && c.options.allow_partial) return [] {};  // no state of this object in the file
      detail::restore_fail(c, "'" + name + "/" + key + "' is " + (saved ? "'" + *saved + "'" : std::string("missing")) +
                                  " in the file's metadata, '" + value + "' in the program: the saved state of '" + name +
                                  "' does not apply to it");
    }
    const std::string where = "the state of '" + name + "'";
    std::vector<std::pair<double*, double>> reals;
    for (const auto& r : state->reals) {
      const auto t = detail::take<double>(c, name + "/" + r.name, shape{}, where);
      if (!t) continue;
      const double v = t->data()[0];
      if (std::isnan(v)) detail::restore_fail(c, "'" + name + "/" + r.name + "' is NaN");
      reals.emplace_back(r.value, r.negated ? -v : v);
    }
    std::vector<std::pair<int*, int>> integers;
    for (const auto& i : state->integers) {
      const auto t = detail::take<std::int64_t>(c, name + "/" + i.name, shape{}, where);
      if (!t) continue;
      const std::int64_t v = t->data()[0];
      if (v < i.minimum || v > std::numeric_limits<int>::max())
        detail::restore_fail(c, "'" + name + "/" + i.name + "' = " + std::to_string(v) + " is not in [" +
                                    std::to_string(i.minimum) + ", " + std::to_string(std::numeric_limits<int>::max()) + "]");
      integers.emplace_back(i.value, static_cast<int>(v));
    }
    if (reals.empty() && integers.empty()) return [] {};
    return [state, reals = std::move(reals), integers = std::move(integers)] {
      for (const auto& [p, v] : reals) *p = v;
      for (const auto& [p, v] : integers) *p = v;
      if (state->restored) state->restored();
    };
  };
}

FLUXION_IO_INLINE checkpoint_object::checkpoint_object(const checkpoint_object& other) = default;
FLUXION_IO_INLINE checkpoint_object::checkpoint_object(checkpoint_object&& other) noexcept = default;
FLUXION_IO_INLINE checkpoint_object& checkpoint_object::operator=(const checkpoint_object& other) = default;
FLUXION_IO_INLINE checkpoint_object& checkpoint_object::operator=(checkpoint_object&& other) noexcept = default;
FLUXION_IO_INLINE checkpoint_object::~checkpoint_object() = default;

FLUXION_IO_INLINE checkpoint::checkpoint(std::initializer_list<checkpoint_object> objects) : m_objects(objects) {
  std::set<std::string> names;
  for (const auto& o : m_objects)
    if (!names.insert(o.name()).second)
      throw invalid_argument("checkpoint: two objects are named '" + o.name() + "'");
}

FLUXION_IO_INLINE std::string checkpoint::file_name(const std::string& path) {
  const std::string ext = ".safetensors";
  if (path.size() >= ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0) return path;
  return path + ext;
}

FLUXION_IO_INLINE io::safetensors checkpoint::to_safetensors() const {
  io::safetensors file;
  std::set<std::string> names;
  const detail::slot_names keys = slot_keys();
  for (const auto& o : m_objects) o.m_save(file, names, keys);
  file.set_metadata("format", "fluxion.checkpoint");
  return file;
}

FLUXION_IO_INLINE std::string checkpoint::save(const std::string& path) const { return save(path, to_safetensors()); }

FLUXION_IO_INLINE std::string checkpoint::save(const std::string& path, const io::safetensors& contents) const {
  const std::string file = file_name(path);
  const std::string parent = io::detail::parent_directory(file);
  if (const int code = io::detail::make_directories(parent))
    throw io_error("checkpoint::save: '" + file + "': cannot create the directory '" + parent +
                   "': " + io::detail::error_text(code));
  contents.save(file, "checkpoint::save");
  return file;
}

FLUXION_IO_INLINE std::string checkpoint::restore(const std::string& path, restore_options options) {
  const std::string file = file_name(path);
  restore(io::safetensors::load(file, "checkpoint::restore"), options, file);
  return file;
}

FLUXION_IO_INLINE void checkpoint::restore(const io::safetensors& file, restore_options options, const std::string& source) {
  detail::restore_context c{file, source.empty() ? file.source() : source, options};
  c.slots = slot_keys();
  for (const auto& o : m_objects)
    if (o.m_trainables) o.m_trainables(c);
  std::vector<std::function<void()>> commits;
  for (const auto& o : m_objects) commits.push_back(o.m_plan(c));
  if (!options.allow_partial)
    for (const auto& name : file.names())
      if (!c.claimed.count(name))
        detail::restore_fail(c, "the file has a tensor '" + name + "' that no object of the checkpoint has" +
                                    unbuilt_hint(name) +
                                    " (pass restore_options{.allow_partial = true} to ignore it)");
  for (auto& commit : commits) commit();
}

FLUXION_IO_INLINE detail::slot_names checkpoint::slot_keys() const {
  std::vector<detail::owned_variable> owned;
  for (const auto& o : m_objects)
    if (o.m_owned) o.m_owned(owned);
  return detail::slot_names::of(owned);
}

FLUXION_IO_INLINE std::string checkpoint::unbuilt_hint(const std::string& name) const {
  for (const auto& o : m_objects)
    if (o.kind() == "model" && name.rfind(o.name() + "/", 0) == 0)
      return " (is model '" + o.name() + "' built? layers create their variables on their first call)";
  return "";
}

FLUXION_IO_INLINE std::vector<std::pair<std::int64_t, std::string>> list_checkpoints(const std::string& directory,
                                                                                     const std::string& prefix) {
  std::vector<std::pair<std::int64_t, std::string>> out;
  std::vector<std::string> files;
  if (const int code = io::detail::list_directory(directory, files)) {
    if (code == ENOENT) return out;
    throw io_error("list_checkpoints: '" + directory + "': cannot list the directory: " + io::detail::error_text(code));
  }
  const std::string ext = ".safetensors";
  for (const std::string& file : files) {
    if (file.size() <= ext.size() || file.compare(file.size() - ext.size(), ext.size(), ext) != 0) continue;
    const std::string stem = file.substr(0, file.size() - ext.size());
    const std::size_t dash = stem.rfind('-');
    if (dash == std::string::npos || dash + 1 == stem.size()) continue;
    if (!prefix.empty() ? stem.compare(0, dash, prefix) != 0 || dash != prefix.size() : dash == 0) continue;
    const std::string digits = stem.substr(dash + 1);
    std::int64_t step = 0;
    const auto [ptr, err] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
    if (err != std::errc() || ptr != digits.data() + digits.size() || step < 0 || digits[0] == '+') continue;
    std::string path = io::detail::join_path(directory, file);
    if (io::detail::stat_path(path).kind != io::detail::file_kind::regular) continue;
    out.emplace_back(step, std::move(path));
  }
  std::sort(out.begin(), out.end());
  return out;
}

FLUXION_IO_INLINE std::optional<std::string> latest_checkpoint(const std::string& directory, const std::string& prefix) {
  const auto all = list_checkpoints(directory, prefix);
  if (all.empty()) return std::nullopt;
  return all.back().second;
}

FLUXION_IO_INLINE checkpoint_manager::checkpoint_manager(checkpoint& ckpt, std::string directory,
                                                         checkpoint_manager_options options)
    : m_checkpoint(&ckpt), m_directory(std::move(directory)), m_options(std::move(options)) {
  if (m_options.max_to_keep < 0)
    throw invalid_argument("checkpoint_manager: max_to_keep = " + std::to_string(m_options.max_to_keep) +
                           " must be non-negative (0 keeps every checkpoint)");
  if (m_options.prefix.empty() || m_options.prefix.find('/') != std::string::npos)
    throw invalid_argument("checkpoint_manager: prefix = '" + m_options.prefix +
                           "' must be a non-empty file name without '/'");
}

FLUXION_IO_INLINE std::string checkpoint_manager::save(std::int64_t step) {
  if (step < 0) throw invalid_argument("checkpoint_manager::save: step = " + std::to_string(step) + " must be non-negative");
  const std::string path =
      io::detail::join_path(m_directory, m_options.prefix + "-" + std::to_string(step) + ".safetensors");
  m_checkpoint->save(path);
  if (m_options.max_to_keep > 0) {
    auto all = checkpoints();
    std::size_t excess = all.size() > static_cast<std::size_t>(m_options.max_to_keep)
                             ? all.size() - static_cast<std::size_t>(m_options.max_to_keep)
                             : 0;
    for (const auto& [s, file] : all) {
      if (excess == 0) break;
      if (file == path) continue;
      if (const int code = io::detail::remove_file(file))
        throw io_error("checkpoint_manager::save: cannot delete the old checkpoint '" + file +
                       "': " + io::detail::error_text(code));
      --excess;
    }
  }
  return path;
}

FLUXION_IO_INLINE std::vector<std::pair<std::int64_t, std::string>> checkpoint_manager::checkpoints() const {
  return list_checkpoints(m_directory, m_options.prefix);
}

FLUXION_IO_INLINE std::optional<std::string> checkpoint_manager::latest() const { return latest_checkpoint(m_directory, m_options.prefix); }

FLUXION_IO_INLINE std::optional<std::string> checkpoint_manager::restore_latest(restore_options options) {
  return m_checkpoint->restore(latest(), options);
}
#endif  // FLUXION_IO_DEFINITIONS

}  // namespace fluxion

#if FLUXION_IO_PREBUILT && FLUXION_MAX_DERIVATIVE_ORDER == 1 && !FLUXION_FORWARD_MODE && !FLUXION_DEVICE_OPTIMIZERS
// The objects a checkpoint holds, bound once in src/io.cpp (io/prebuilt.hpp) for programs built
// with prebuilt kernels and the default autodiff settings, which src/io.cpp is built with; a
// model's binding depends on its type and stays in the program. Programs with other settings, or
// with device optimizers, compile their own.
#define FLUXION_CHECKPOINT_TENSOR_SPECIALIZATIONS(T)                                                         \
  FLUXION_IO_EXTERN template std::optional<tensor<T>> detail::take<T>(detail::restore_context&, const std::string&, \
                                                                     const shape&, const std::string&);       \
  FLUXION_IO_EXTERN template void detail::add_unique<tensor<T>>(io::safetensors&, std::set<std::string>&,     \
                                                                const std::string&, const tensor<T>&);        \
  FLUXION_IO_EXTERN template checkpoint_object::checkpoint_object(std::string, variable<T>&);

namespace fluxion {
FLUXION_CHECKPOINT_TENSOR_SPECIALIZATIONS(float)
FLUXION_CHECKPOINT_TENSOR_SPECIALIZATIONS(double)
FLUXION_CHECKPOINT_TENSOR_SPECIALIZATIONS(std::int32_t)
FLUXION_CHECKPOINT_TENSOR_SPECIALIZATIONS(std::int64_t)
FLUXION_IO_EXTERN template checkpoint_object::checkpoint_object(std::string, optim::sgd&);
FLUXION_IO_EXTERN template checkpoint_object::checkpoint_object(std::string, optim::adam&);
FLUXION_IO_EXTERN template checkpoint_object::checkpoint_object(std::string, optim::rmsprop&);
FLUXION_IO_EXTERN template checkpoint_object::checkpoint_object(std::string, optim::adagrad&);
FLUXION_IO_EXTERN template checkpoint_object::checkpoint_object(std::string, std::int64_t&);
FLUXION_IO_EXTERN template checkpoint_object::checkpoint_object(std::string, random::generator&);
FLUXION_IO_EXTERN template checkpoint_object::commit_function checkpoint_object::plan_slots<float, cpu>(
    const std::string&, optim::optimizer&, detail::restore_context&, const std::vector<variable<float, cpu>*>&);
FLUXION_IO_EXTERN template checkpoint_object::commit_function checkpoint_object::plan_slots<double, cpu>(
    const std::string&, optim::optimizer&, detail::restore_context&, const std::vector<variable<double, cpu>*>&);
}  // namespace fluxion

#undef FLUXION_CHECKPOINT_TENSOR_SPECIALIZATIONS
#endif

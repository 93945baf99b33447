#include "reuse/step_reuse.h"

#include <unistd.h>

#include <algorithm>

#include "core/sha256.h"
#include "core/text.h"
#include "workflow/spec_yaml_support.h"

namespace grademl::reuse {

StepReuse::StepReuse(const ReuseOptions& options) : options_(options) {
  cache_ = std::make_unique<FileHashCache>(options.hash_cache);
  hasher_ = std::make_unique<ContentHasher>(cache_.get());
  hasher_->SetStop(options.stop);
  environment_ = CurrentEnvironment();
  trusted_.push_back(static_cast<uint32_t>(geteuid()));
  for (uint32_t uid : options.trusted_uids) {
    if (std::find(trusted_.begin(), trusted_.end(), uid) == trusted_.end()) trusted_.push_back(uid);
  }
}

StatusOr<std::unique_ptr<StepReuse>> StepReuse::Create(const ReuseOptions& options) {
  GRADEML_RETURN_IF_ERROR(Sha256Available());
  std::unique_ptr<StepReuse> r(new StepReuse(options));
  if (options.reuse) {
    if (options.artifacts_dir.empty()) {
      return InvalidArgument("--reuse with a PostgreSQL store needs --artifacts DIR (a directory every host can reach)");
    }
    auto store = ArtifactStore::Open(options.artifacts_dir);
    if (!store.ok()) return Status(store.status().code(), "artifact store: " + store.status().message());
    r->artifacts_ = std::move(*store);
    r->artifacts_->SetStop(options.stop);
    // What this user's restores killed midway (SIGKILL) left beside their outputs.
    r->artifacts_->RemoveStaleRestores();
  }
  return r;
}

StatusOr<std::vector<model::StoredStepExecution>> StepReuse::Lookup(const std::string& key) const {
  std::lock_guard lock(db_mu_);
  if (!db_) {
    GRADEML_ASSIGN_OR_RETURN(db_, store::Database::Open(options_.db_path, store::Database::Mode::kReadOnly));
  }
  return db_->ListStepExecutions(key);
}

StepReuse::Before StepReuse::BeforeStep(const workflow::StepSpec& step) const {
  Before b;
  b.identity = IdentifyStep(step, *hasher_, environment_);
  if (!options_.reuse) return b;
  if (b.identity.key.empty()) {
    b.note = "not reusable this time: " + b.identity.error;
    return b;
  }
  if (!b.identity.not_reusable.empty()) return b;  // said once by the runner, at start
  auto found = Lookup(b.identity.key);
  if (!found.ok()) {
    b.note = "no lookup: " + found.status().message();
    return b;
  }
  // The latest identical execution whose outputs are all materialised.
  for (auto it = found->rbegin(); it != found->rend(); ++it) {
    const model::StepExecution& e = it->execution;
    if (e.outcome != "ran" && e.outcome != "reused") continue;
    if (e.outputs.size() != step.outs.size()) continue;
    bool all = std::all_of(e.outputs.begin(), e.outputs.end(),
                           [&](const model::StepArtifact& a) { return artifacts_->Has(a); });
    if (!all) continue;
    // Only what a trusted user recorded: a row of a shared store proves nothing. The first
    // execution refused is said once (one line for the step), the search goes on.
    ArtifactStore::RecordCheck check = artifacts_->CheckRecord(b.identity.key, e.outputs, trusted_);
    if (!check.trusted) {
      if (b.note.empty()) b.note = "run " + std::to_string(it->run) + "'s outputs not restored: " + check.why;
      continue;
    }
    int64_t start = WallClock::MonotonicNow();
    int64_t bytes = 0;
    Status st = Status::Ok();
    for (size_t i = 0; i < e.outputs.size() && st.ok(); ++i) {
      auto written = artifacts_->Restore(e.outputs[i], workflow::spec_internal::ResolvePath(step.cwd, step.outs[i]), hasher_.get());
      if (written.ok()) {
        bytes += *written;
      } else {
        st = written.status();
      }
    }
    if (!st.ok() && options_.stop && options_.stop()) {
      b.note = "restoring run " + std::to_string(it->run) + "'s outputs stopped (grademl was asked to stop)";
      return b;
    }
    if (!st.ok()) {
      b.note = "could not restore run " + std::to_string(it->run) + "'s outputs (" + st.message() + "): running it";
      return b;
    }
    b.restored = true;
    b.from = *it;
    b.outputs = e.outputs;
    b.restore_ns = WallClock::MonotonicNow() - start;
    b.restored_bytes = bytes;
    return b;
  }
  return b;
}

StepReuse::After StepReuse::AfterStep(const workflow::StepSpec& step) const {
  After a;
  int64_t start = WallClock::MonotonicNow();
  for (const std::string& out : step.outs) {
    model::StepArtifact art{.path = out};
    StatusOr<ContentHash> h = hasher_->Hash(workflow::spec_internal::ResolvePath(step.cwd, out));
    if (h.ok()) {
      art.hash = h->hash;
      art.size = h->size;
      art.directory = h->directory;
      a.bytes_read += h->bytes_read;
      a.contents.push_back(std::move(*h));
    } else {
      if (a.note.empty()) a.note = fmt::format("out '{}': {}", EscapeControl(out), h.status().message());
      a.contents.emplace_back();
    }
    a.outputs.push_back(std::move(art));
  }
  a.hash_ns = WallClock::MonotonicNow() - start;
  return a;
}

DurationNs StepReuse::Materialize(const workflow::StepSpec& step, const StepIdentity& identity, const After& after,
                                  std::string* note) const {
  if (!options_.reuse || !artifacts_) return 0;
  if (identity.key.empty() || !identity.not_reusable.empty()) return 0;
  for (const model::StepArtifact& a : after.outputs) {
    if (a.hash.empty()) {
      *note = fmt::format("outputs not materialised: out '{}' was not written", EscapeControl(a.path));
      return 0;
    }
  }
  int64_t start = WallClock::MonotonicNow();
  for (size_t i = 0; i < after.outputs.size(); ++i) {
    const model::StepArtifact& a = after.outputs[i];
    auto written = artifacts_->Materialize(workflow::spec_internal::ResolvePath(step.cwd, step.outs[i]), a, &after.contents[i]);
    if (!written.ok()) {
      *note = fmt::format("outputs not materialised: {}", written.status().message());
      return WallClock::MonotonicNow() - start;
    }
  }
  // Last: the record that binds the step's key to these outputs, owned by this user.
  if (Status recorded = artifacts_->WriteRecord(identity.key, after.outputs); !recorded.ok()) {
    *note = fmt::format("outputs not recorded: {}", recorded.message());
  }
  return WallClock::MonotonicNow() - start;
}

}  // namespace grademl::reuse

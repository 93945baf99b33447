// StepReuse: the work the workflow runner does around each step for the experiment graph
// and `--reuse` (docs/reuse.md): before a step, its inputs are hashed into its identity and,
// with reuse on, an earlier identical execution whose outputs are materialised is looked up
// in the store and its outputs restored instead of running the step; after a step, its
// outputs are hashed and, with reuse on, copied into the artifact store. Outputs are restored
// only from an execution whose record in the artifact store a trusted user wrote (the user
// running grademl, or one named by --trust / reuse.trust). Every method
// blocks (it reads files): the runner calls them on threads of their own, never on its loop.
// Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "model/run.h"
#include "store/database.h"
#include "reuse/artifact_store.h"
#include "reuse/content_hash.h"
#include "reuse/file_hash_cache.h"
#include "reuse/step_identity.h"
#include "workflow/workflow_spec.h"

namespace grademl::reuse {

struct ReuseOptions {
  bool reuse = false;          // --reuse: restore identical executions, materialise outputs
  std::string db_path;         // the run store, for the lookups
  std::string artifacts_dir;   // the artifact store ("" with reuse off)
  std::string hash_cache;      // the FileHashCache file ("" for none)
  // Besides the user running grademl, the OS users (ids) whose records of a step's outputs
  // are restored from (--trust, reuse.trust): ArtifactStore::CheckRecord.
  std::vector<uint32_t> trusted_uids;
  // Asked between units of hashing, restoring and materialising (blocks of a file, entries of
  // a directory): true ends that work early with a note (grademl was asked to stop).
  std::function<bool()> stop;
};

class StepReuse {
 public:
  // With reuse on, an artifact directory that cannot be opened is an error.
  static StatusOr<std::unique_ptr<StepReuse>> Create(const ReuseOptions& options);

  // Before a step runs.
  struct Before {
    StepIdentity identity;
    bool restored = false;              // its outputs were restored: do not run it
    model::StoredStepExecution from;    // restored: the execution whose outputs these are
    std::vector<model::StepArtifact> outputs;  // restored: the outputs
    DurationNs restore_ns = 0;
    int64_t restored_bytes = 0;
    std::string note;                   // one line for the terminal ("" for none)
  };
  Before BeforeStep(const workflow::StepSpec& step) const;

  // After a step succeeded: its outputs hashed (an out it did not write has an empty hash).
  struct After {
    std::vector<model::StepArtifact> outputs;
    std::vector<ContentHash> contents;  // per output (directories' manifests)
    DurationNs hash_ns = 0;
    int64_t bytes_read = 0;
    std::string note;
  };
  After AfterStep(const workflow::StepSpec& step) const;

  // With reuse on, after AfterStep: copies the outputs into the artifact store. Returns the
  // time it took (0 when nothing was copied); `note` says why not, when it was not.
  DurationNs Materialize(const workflow::StepSpec& step, const StepIdentity& identity, const After& after,
                         std::string* note) const;

  bool reuse() const { return options_.reuse; }
  const ArtifactStore* artifacts() const { return artifacts_.get(); }

 private:
  explicit StepReuse(const ReuseOptions& options);
  StatusOr<std::vector<model::StoredStepExecution>> Lookup(const std::string& key) const;

  ReuseOptions options_;
  std::unique_ptr<FileHashCache> cache_;
  std::unique_ptr<ContentHasher> hasher_;
  std::unique_ptr<ArtifactStore> artifacts_;
  std::vector<std::string> environment_;
  std::vector<uint32_t> trusted_;  // the user running grademl first
  mutable std::mutex db_mu_;
  mutable std::unique_ptr<store::Database> db_;  // opened at the first lookup
};

}  // namespace grademl::reuse

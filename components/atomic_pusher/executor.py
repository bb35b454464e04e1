"""Pusher executor that pushes atomically and keeps TF Serving's models.config current.

TFX's Pusher copies file by file into the final version directory (a polling server
can load a half-copied model) and names versions by the clock alone. This one copies
into a hidden directory and renames it into place (serving/push.py), labels the new
version `canary` in <serving root>/models.config (serving/model_config.py), and deletes
the oldest versions beyond `keep_versions`, never a labelled one. The serving check's
warmup requests go into assets.extra/ of the pushed copy, where TF Serving replays them.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from tfx import types
from tfx.components.pusher import executor as pusher_executor
from tfx.proto import pusher_pb2
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import io_utils, proto_utils

from components.atomic_pusher.keys import DEFAULT_KEEP_VERSIONS, KEEP_VERSIONS_KEY, SERVING_LABELS
from serving import model_config, publish, push, warmup


class Executor(pusher_executor.Executor):
    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        model_push = artifact_utils.get_single_instance(output_dict[standard_component_specs.PUSHED_MODEL_KEY])
        if not self.CheckBlessing(input_dict):
            self._MarkNotPushed(model_push)
            return
        destination = pusher_pb2.PushDestination()
        proto_utils.json_to_proto(exec_properties[standard_component_specs.PUSH_DESTINATION_KEY], destination)
        if destination.WhichOneof("destination") != "filesystem":
            # Atomic rename and models.config need a filesystem; other destinations (an object
            # store, a Vertex endpoint) use TFX's own Pushers (see pipeline/pipeline.py).
            raise ValueError(f"push destination {destination.WhichOneof('destination')!r} is not supported: "
                             "turbotfx pushes to a filesystem directory (PushDestination.filesystem)")
        custom_config = json.loads(exec_properties.get(standard_component_specs.CUSTOM_CONFIG_KEY) or "null") or {}
        keep = int(custom_config.get(KEEP_VERSIONS_KEY, DEFAULT_KEEP_VERSIONS))

        model_path = self.GetModelPath(input_dict)
        model_dir = Path(destination.filesystem.base_directory)
        serving_root, model_name = model_dir.parent, model_dir.name
        push.remove_stale_staging(model_dir)
        # The archive copy first: a full disk fails here, before the server sees anything.
        io_utils.copy_dir(model_path, model_push.uri)
        # Kept through this push's retention too: until TFX records the push, a failure
        # sets the new version aside and the old labels are what serves.
        labelled_before = model_config.protected_versions(serving_root, model_name)
        version, serving_path, labels = publish.push_and_label(model_path, model_dir, _warmup_files(input_dict))
        try:
            with model_config.changing(serving_root):
                push.apply_retention(model_dir, keep,
                                     labelled_before | model_config.protected_versions(serving_root, model_name))
        except OSError as err:  # the push stands; old versions stay until the next one
            logging.warning("retention in %s failed: %s", model_dir, err)
        # What the metadata store records: the labels let a lost models.config be rebuilt.
        model_push.set_string_custom_property(SERVING_LABELS, json.dumps(labels, sort_keys=True))
        self._MarkPushed(model_push, pushed_destination=str(serving_path), pushed_version=str(version))


def _warmup_files(input_dict: dict[str, list[types.Artifact]]) -> dict[str, str]:
    """The serving check's replayed warmup requests, shipped inside the SavedModel."""
    for blessing in input_dict.get(standard_component_specs.INFRA_BLESSING_KEY) or []:
        source = os.path.join(blessing.uri, warmup.WARMUP_FILE)
        if os.path.exists(source):
            return {warmup.IN_SAVED_MODEL: source}
    return {}

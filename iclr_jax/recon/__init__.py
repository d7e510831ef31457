"""3-D reconstruction from image streams (STream3R): the model (`STream3R`, with streaming
through a KV cache) and its recurrent-state baseline, metrics, the training losses, a ray
caster that renders scenes with exact depth, pointmaps and poses.

    from iclr_jax import recon
    scale, R, t = recon.umeyama_sim3(src, dst)        # dst ≈ scale · R @ src + t
    acc, comp = recon.accuracy_completeness(pred, gt)
"""

from iclr_jax.nn.stream3r import ATTENTION_MODES, Config, RecurrentRecon, STream3R
from iclr_jax.recon.losses import (camera_loss, confidence_loss, pose_encoding,
                                   stream3r_loss)
from iclr_jax.recon.metrics import (absolute_trajectory_error, accuracy_completeness,
                                    depth_metrics, normal_consistency, pointmap_normals,
                                    relative_pose_error, umeyama_sim3)
from iclr_jax.recon.raycast import Scene, pixel_rays, render

__all__ = ["ATTENTION_MODES", "Config", "RecurrentRecon", "STream3R", "Scene", "absolute_trajectory_error", "accuracy_completeness", "camera_loss",
           "confidence_loss", "depth_metrics", "normal_consistency", "pixel_rays",
           "pointmap_normals", "pose_encoding", "relative_pose_error", "render",
           "stream3r_loss", "umeyama_sim3"]

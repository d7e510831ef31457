"""Human motion in HumanML3D's format: the 22-joint skeleton, the 263-d features both ways,
the Haar wavelet transform, the benchmark's evaluation metrics, and cameras that film a
motion (poses, 9-d features, on-screen framing).

    from iclr_jax import motion
    feats = motion.features_from_joints(joints)          # [t, 22, 3] -> [t-1, 263]
    joints = motion.recover_from_ric(feats, joints_num=22)
"""

from iclr_jax.motion.camera import (CAMERA_FEATURE_DIM, camera_features,
                                    cameras_from_features, framing_error, look_at,
                                    out_of_frame_rate, project_to_screen)
from iclr_jax.motion.features import (FEATURE_DIM, canonical_joints, feature_dim,
                                      feature_slices, features_from_joints,
                                      gaussian_smooth, recover_from_ric, retarget,
                                      root_trajectory, smoothing_matrix)
from iclr_jax.motion.metrics import (RPrecision, diversity, euclidean_distances,
                                     frechet_distance, gaussian_statistics, mean_interval,
                                     multimodality, r_precision)
from iclr_jax.motion.skeleton import (BONE_LENGTHS, JOINT_NAMES, KINEMATIC_CHAIN, NUM_JOINTS,
                                      PARENTS, RAW_OFFSETS, TARGET_OFFSETS, bone_offsets,
                                      facing_direction, forward_kinematics,
                                      inverse_kinematics)
from iclr_jax.wavelet import haar_dwt, haar_idwt

__all__ = [
    "BONE_LENGTHS", "CAMERA_FEATURE_DIM", "FEATURE_DIM", "JOINT_NAMES", "KINEMATIC_CHAIN",
    "NUM_JOINTS", "PARENTS", "RAW_OFFSETS", "RPrecision", "TARGET_OFFSETS", "bone_offsets",
    "camera_features", "cameras_from_features", "canonical_joints", "diversity",
    "euclidean_distances", "facing_direction", "feature_dim", "feature_slices",
    "features_from_joints", "forward_kinematics", "framing_error", "frechet_distance",
    "gaussian_smooth", "gaussian_statistics", "haar_dwt", "haar_idwt", "inverse_kinematics",
    "look_at", "mean_interval", "multimodality", "out_of_frame_rate", "project_to_screen",
    "r_precision", "recover_from_ric", "retarget", "root_trajectory", "smoothing_matrix",
]

"""Every environment id Ajax builds, listed without importing the libraries behind them.

Importing Brax or Playground takes seconds, and gymnax imports matplotlib, seaborn and SciPy
for its renderers. With the ids written down here, ``ajax list``, the suggestions for a
mistyped id and its refusal answer without those imports; a family's library is imported
when one of its environments is built. ``tests/test_envs.py`` checks each table against its
library's own registry, so an upgrade that adds or drops an id fails there.
"""

from __future__ import annotations

#: ``gymnax.registered_envs``; MNISTBandit-bsuite downloads MNIST when built.
GYMNAX = (
    "CartPole-v1",
    "Pendulum-v1",
    "Acrobot-v1",
    "MountainCar-v0",
    "MountainCarContinuous-v0",
    "Asterix-MinAtar",
    "Breakout-MinAtar",
    "Freeway-MinAtar",
    "Seaquest-MinAtar",
    "SpaceInvaders-MinAtar",
    "Catch-bsuite",
    "DeepSea-bsuite",
    "MemoryChain-bsuite",
    "UmbrellaChain-bsuite",
    "DiscountingChain-bsuite",
    "MNISTBandit-bsuite",
    "SimpleBandit-bsuite",
    "FourRooms-misc",
    "MetaMaze-misc",
    "PointRobot-misc",
    "BernoulliBandit-misc",
    "GaussianBandit-misc",
    "Reacher-misc",
    "Swimmer-misc",
    "Pong-misc",
    "FrozenLake-misc",
)

#: ``brax.envs``' registry.
BRAX = (
    "ant",
    "fast",
    "halfcheetah",
    "hopper",
    "humanoid",
    "humanoidstandup",
    "inverted_double_pendulum",
    "inverted_pendulum",
    "pusher",
    "reacher",
    "swimmer",
    "walker2d",
)

#: ``mujoco_playground.dm_control_suite.ALL_ENVS``: the suite whose model files ship inside
#: the package.
PLAYGROUND = (
    "AcrobotSwingup",
    "AcrobotSwingupSparse",
    "BallInCup",
    "CartpoleBalance",
    "CartpoleBalanceSparse",
    "CartpoleSwingup",
    "CartpoleSwingupSparse",
    "CheetahRun",
    "FingerSpin",
    "FingerTurnEasy",
    "FingerTurnHard",
    "FishSwim",
    "HopperHop",
    "HopperStand",
    "HumanoidStand",
    "HumanoidWalk",
    "HumanoidRun",
    "PendulumSwingup",
    "PointMass",
    "ReacherEasy",
    "ReacherHard",
    "SwimmerSwimmer6",
    "WalkerRun",
    "WalkerStand",
    "WalkerWalk",
)

#: Playground's locomotion and manipulation ids: their MuJoCo Menagerie models are downloaded
#: when first built, so Ajax refuses them (it fetches nothing at run time).
PLAYGROUND_DOWNLOADS = (
    "ApolloJoystickFlatTerrain",
    "BarkourJoystick",
    "BerkeleyHumanoidJoystickFlatTerrain",
    "BerkeleyHumanoidJoystickRoughTerrain",
    "G1JoystickFlatTerrain",
    "G1JoystickRoughTerrain",
    "Go1Footstand",
    "Go1Getup",
    "Go1Handstand",
    "Go1JoystickFlatTerrain",
    "Go1JoystickRoughTerrain",
    "H1InplaceGaitTracking",
    "H1JoystickGaitTracking",
    "Op3Joystick",
    "SpotFlatTerrainJoystick",
    "SpotGetup",
    "SpotJoystickGaitTracking",
    "T1JoystickFlatTerrain",
    "T1JoystickRoughTerrain",
    "AeroCubeRotateZAxis",
    "AlohaHandOver",
    "AlohaSinglePegInsertion",
    "LeapCubeReorient",
    "LeapCubeRotateZAxis",
    "PandaOpenCabinet",
    "PandaPickCube",
    "PandaPickCubeCartesian",
    "PandaPickCubeOrientation",
    "PandaRobotiqPushCube",
)

#: ``target_gym.registry.REGISTRY``'s keys (the aliases ``Plane`` and ``Plane3DCircle`` are
#: added by :mod:`ajax.envs.target_gym_adapter`).
TARGET_GYM = (
    "plane",
    "plane_energy",
    "plane_sine",
    "plane3d_heading",
    "plane3d_circle",
    "plane3d_racetrack",
    "plane3d_figure8",
    "patrol",
    "patrol_bearing_only",
    "cstr",
    "first_order",
    "four_tank",
    "ph_neutralization",
    "distillation",
    "glass_furnace",
    "reactor",
    "hvac",
    "cement_kiln",
    "boiler_drum",
    "wind_turbine",
    "battery",
)

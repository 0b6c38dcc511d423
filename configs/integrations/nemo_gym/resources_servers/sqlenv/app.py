"""NeMo Gym's entry point for sqlenv's resources server (configs/integrations/nemo_gym_sqlenv.yaml):
`gym env start` runs this file from this folder, with the config in its environment."""

from sqlenv.integrations.nemo_gym import SQLEnvResourcesServer

if __name__ == "__main__":
    SQLEnvResourcesServer.run_webserver()

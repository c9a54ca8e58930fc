// The validator and its updater under pm2, run from the checkout with its virtual environment:
//
//   pm2 start deploy/pm2/ecosystem.config.js && pm2 save
//
// Put your settings in `env` (every flag has a SHOPBENCH_* variable). The validator exits 0
// when the updater asks for a restart; pm2 starts it again on the new code.
// docs/validator.md, "Run it for weeks".
const path = require("path");

const ROOT = path.resolve(__dirname, "..", "..");
const PYTHON = path.join(ROOT, ".venv", "bin", "python");
const SETTINGS = {
  SHOPBENCH_NEURON_FULL_PATH: path.join(process.env.HOME || "/root", ".shopbench", "validator"),
};

module.exports = {
  apps: [
    {
      name: "shopbench-validator",
      cwd: ROOT,
      interpreter: PYTHON,
      script: "neurons/validator.py",
      args: [],
      env: {
        ...SETTINGS,
        SHOPBENCH_NETUID: "0",
        SHOPBENCH_SUBTENSOR_NETWORK: "finney",
        SHOPBENCH_WALLET_NAME: "default",
        SHOPBENCH_WALLET_HOTKEY: "default",
      },
      autorestart: true,
      restart_delay: 5000,
      // SIGINT abandons the round in flight and closes the archive: give it a minute.
      kill_timeout: 60000,
    },
    {
      name: "shopbench-updater",
      cwd: ROOT,
      interpreter: PYTHON,
      script: "neurons/updater.py",
      args: ["--every", "300"],
      env: { ...SETTINGS },
      autorestart: true,
      restart_delay: 60000,
    },
  ],
};

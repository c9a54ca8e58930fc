// The validator and its updater under pm2, run from the checkout with its virtual environment:
//
//   NETUID=N pm2 start deploy/pm2/ecosystem.config.js && pm2 save
//
// Put your other settings in `env` (every flag has a SHOPBENCH_* variable). The validator
// exits 0 when the updater asks for a restart; pm2 starts it again on the new code. It
// exits 2 when a setting is refused (one line in its log naming it): pm2 leaves it stopped.
// docs/validator.md, "Run it for weeks".
const path = require("path");

// The subnet's netuid: no default, so a copied file never runs a validator on a placeholder.
const NETUID = (process.env.NETUID || "").trim();
if (!/^[1-9][0-9]*$/.test(NETUID)) {
  throw new Error(
    `set NETUID to your subnet's netuid (got ${JSON.stringify(NETUID)}): ` +
      "NETUID=N pm2 start deploy/pm2/ecosystem.config.js",
  );
}
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
        SHOPBENCH_NETUID: NETUID,
        SHOPBENCH_SUBTENSOR_NETWORK: "finney",
        SHOPBENCH_WALLET_NAME: "default",
        SHOPBENCH_WALLET_HOTKEY: "default",
      },
      autorestart: true,
      restart_delay: 5000,
      // Exit 2: a setting was refused at start; starting again would refuse it again.
      stop_exit_codes: [2],
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

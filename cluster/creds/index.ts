export {
  renderAuthConfig,
  tenantAccount,
  tenantPermissions,
  operatorPermissions,
  RUNWAY_ACCOUNT,
  SYSTEM_ACCOUNT,
  type Identity,
  type Role,
  type Permissions,
  type AuthConfigOptions,
} from "./config.js";
export { planCredentials, AUTH_CONFIG_FILE, IDENTITIES_FILE, type CredsSpec, type CredsPlan, type PlannedCredential } from "./plan.js";
export {
  writeCredentials,
  readIdentities,
  readSeed,
  seedAuthenticator,
  publicKeyOf,
  newUserSeed,
  specOf,
  type CredentialFile,
  type StoredIdentity,
  type WriteCredsResult,
  type WriteCredsOptions,
} from "./store.js";
export { runCredsCommand, CREDS_USAGE, type CredsIo } from "./command.js";
export { devCredentials, DEV_NAME, type DevCredentials } from "./dev.js";
export { callerDirectory } from "./directory.js";

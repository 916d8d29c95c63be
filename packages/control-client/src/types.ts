// Names for the wire shapes the client's methods take and return. They are
// the generated OpenAPI types of the control API, re-exported under their
// schema names so callers need not spell `components['schemas'][…]`.
import type { components } from '@paddock/models/control';

type Schemas = components['schemas'];

/** Body of every error answer. The control API's `Error` schema. */
export type ApiError = Schemas['Error'];
/** Request to create a sandbox. The control API's `NewSandbox` schema. */
export type NewSandbox = Schemas['NewSandbox'];
/** Connection record of a sandbox, returned by create, connect, resume and fork. The control API's `Sandbox` schema. */
export type Sandbox = Schemas['Sandbox'];
/** A sandbox as it appears in a list. The control API's `ListedSandbox` schema. */
export type ListedSandbox = Schemas['ListedSandbox'];
/** Full description of one sandbox. The control API's `SandboxDetail` schema. */
export type SandboxDetail = Schemas['SandboxDetail'];
/** Whether a sandbox is running or paused. The control API's `SandboxState` schema. */
export type SandboxState = Schemas['SandboxState'];
/** Sort direction. The control API's `OrderDirection` schema. */
export type OrderDirection = Schemas['OrderDirection'];
/** One resource-usage sample of a sandbox. The control API's `SandboxMetric` schema. */
export type SandboxMetric = Schemas['SandboxMetric'];
/** A page of structured sandbox log entries. The control API's `SandboxLogsV2Response` schema. */
export type SandboxLogsV2Response = Schemas['SandboxLogsV2Response'];
/** Direction in which to read logs from the cursor. The control API's `LogsDirection` schema. */
export type LogsDirection = Schemas['LogsDirection'];
/** Severity of a log entry. The control API's `LogLevel` schema. */
export type LogLevel = Schemas['LogLevel'];
/** Options for pausing a sandbox. The control API's `SandboxPauseRequest` schema. */
export type SandboxPauseRequest = Schemas['SandboxPauseRequest'];
/** Options for resuming a paused sandbox. The control API's `ResumedSandbox` schema. */
export type ResumedSandbox = Schemas['ResumedSandbox'];
/** Options for connecting to a sandbox. The control API's `ConnectSandbox` schema. */
export type ConnectSandbox = Schemas['ConnectSandbox'];
/**
 * Options for connecting to a sandbox (v2). Both fields may be left out: an empty object connects without
 * changing the expiry of a running sandbox, and gives a resumed one the server's default timeout. The control
 * API's `ConnectSandboxV2` schema.
 */
export type ConnectSandboxV2 = Schemas['ConnectSandboxV2'];
/** New expiry of a sandbox. The control API's `SandboxTimeoutRequest` schema. */
export type SandboxTimeoutRequest = Schemas['SandboxTimeoutRequest'];
/** How long to keep the sandbox alive. The control API's `SandboxRefreshRequest` schema. */
export type SandboxRefreshRequest = Schemas['SandboxRefreshRequest'];
/** New outbound network rules for a running sandbox. The control API's `SandboxNetworkUpdateConfig` schema. */
export type SandboxNetworkUpdateConfig = Schemas['SandboxNetworkUpdateConfig'];
/** Options for forking a sandbox. The control API's `SandboxForkRequest` schema. */
export type SandboxForkRequest = Schemas['SandboxForkRequest'];
/** Outcome of one fork; exactly one of the fields is set. The control API's `SandboxForkResult` schema. */
export type SandboxForkResult = Schemas['SandboxForkResult'];
/** Options for taking a snapshot. The control API's `SandboxSnapshotRequest` schema. */
export type SandboxSnapshotRequest = Schemas['SandboxSnapshotRequest'];
/** A stored snapshot. The control API's `SnapshotInfo` schema. */
export type SnapshotInfo = Schemas['SnapshotInfo'];
/** A template as listed by the legacy template list. The control API's `Template` schema. */
export type Template = Schemas['Template'];
/** A template together with a page of its builds. The control API's `TemplateWithBuilds` schema. */
export type TemplateWithBuilds = Schemas['TemplateWithBuilds'];
/** One build of a template. The control API's `TemplateBuild` schema. */
export type TemplateBuild = Schemas['TemplateBuild'];
/** Template an alias resolves to. The control API's `TemplateAliasResponse` schema. */
export type TemplateAliasResponse = Schemas['TemplateAliasResponse'];
/** Tags to point at a build. The control API's `AssignTemplateTagsRequest` schema. */
export type AssignTemplateTagsRequest = Schemas['AssignTemplateTagsRequest'];
/** Tags now pointing at a build. The control API's `AssignedTemplateTags` schema. */
export type AssignedTemplateTags = Schemas['AssignedTemplateTags'];
/** Tags to remove from a template. The control API's `DeleteTemplateTagsRequest` schema. */
export type DeleteTemplateTagsRequest = Schemas['DeleteTemplateTagsRequest'];
/** A tag of a template. The control API's `TemplateTag` schema. */
export type TemplateTag = Schemas['TemplateTag'];
/** Request to register a new build of a template. The control API's `TemplateBuildRequestV3` schema. */
export type TemplateBuildRequestV3 = Schemas['TemplateBuildRequestV3'];
/** The template and the build reserved for it. The control API's `TemplateRequestResponseV3` schema. */
export type TemplateRequestResponseV3 = Schemas['TemplateRequestResponseV3'];
/** Where build files are, or should be uploaded. The control API's `TemplateBuildFileUpload` schema. */
export type TemplateBuildFileUpload = Schemas['TemplateBuildFileUpload'];
/** What to build. Give one of `fromImage` and `fromTemplate`. The control API's `TemplateBuildStartV2` schema. */
export type TemplateBuildStartV2 = Schemas['TemplateBuildStartV2'];
/** One instruction of a template build. The control API's `TemplateStep` schema. */
export type TemplateStep = Schemas['TemplateStep'];
/** Credentials for pulling the base image from a private registry. The control API's `FromImageRegistry` schema. */
export type FromImageRegistry = Schemas['FromImageRegistry'];
/** Progress of a template build. The control API's `TemplateBuildStatus` schema. */
export type TemplateBuildStatus = Schemas['TemplateBuildStatus'];
/** Status of a build with some of its logs. The control API's `TemplateBuildInfo` schema. */
export type TemplateBuildInfo = Schemas['TemplateBuildInfo'];
/** A page of build log entries. The control API's `TemplateBuildLogsResponse` schema. */
export type TemplateBuildLogsResponse = Schemas['TemplateBuildLogsResponse'];
/** One log entry of a build. The control API's `BuildLogEntry` schema. */
export type BuildLogEntry = Schemas['BuildLogEntry'];
/** Why a build is in its current status, typically why it failed. The control API's `BuildStatusReason` schema. */
export type BuildStatusReason = Schemas['BuildStatusReason'];
/** Storage to read build logs from. The control API's `LogsSource` schema. */
export type LogsSource = Schemas['LogsSource'];
/** What may be shown of a secret without revealing it. The control API's `IdentifierMaskingDetails` schema. */
export type IdentifierMaskingDetails = Schemas['IdentifierMaskingDetails'];
/** An API key as listed, its value masked. The control API's `TeamAPIKey` schema. */
export type TeamAPIKey = Schemas['TeamAPIKey'];
/** A key just created, with its value, which is shown this once. The control API's `CreatedTeamAPIKey` schema. */
export type CreatedTeamAPIKey = Schemas['CreatedTeamAPIKey'];
/** A key to create. The control API's `NewTeamAPIKey` schema. */
export type NewTeamAPIKey = Schemas['NewTeamAPIKey'];
/** A new name for a key. The control API's `UpdateTeamAPIKey` schema. */
export type UpdateTeamAPIKey = Schemas['UpdateTeamAPIKey'];
/** A team, with its limits and what its running sandboxes hold. The control API's `Team` schema. */
export type Team = Schemas['Team'];
/** What a team's running sandboxes may add up to; null, no limit. The control API's `TeamLimits` schema. */
export type TeamLimits = Schemas['TeamLimits'];
/** What a team's running sandboxes hold now. The control API's `TeamUsage` schema. */
export type TeamUsage = Schemas['TeamUsage'];
/** A team to create. The control API's `NewTeam` schema. */
export type NewTeam = Schemas['NewTeam'];

// Names for the wire shapes the client's methods take and return. They are
// the generated OpenAPI types of the control API, re-exported under their
// schema names so callers need not spell `components['schemas'][…]`.
import type { components } from '@paddock/models/control';

type Schemas = components['schemas'];

export type ApiError = Schemas['Error'];
export type NewSandbox = Schemas['NewSandbox'];
export type Sandbox = Schemas['Sandbox'];
export type ListedSandbox = Schemas['ListedSandbox'];
export type SandboxDetail = Schemas['SandboxDetail'];
export type SandboxState = Schemas['SandboxState'];
export type OrderDirection = Schemas['OrderDirection'];
export type SandboxMetric = Schemas['SandboxMetric'];
export type SandboxLogsV2Response = Schemas['SandboxLogsV2Response'];
export type LogsDirection = Schemas['LogsDirection'];
export type LogLevel = Schemas['LogLevel'];
export type SandboxPauseRequest = Schemas['SandboxPauseRequest'];
export type ResumedSandbox = Schemas['ResumedSandbox'];
export type ConnectSandbox = Schemas['ConnectSandbox'];
export type ConnectSandboxV2 = Schemas['ConnectSandboxV2'];
export type SandboxTimeoutRequest = Schemas['SandboxTimeoutRequest'];
export type SandboxRefreshRequest = Schemas['SandboxRefreshRequest'];
export type SandboxNetworkUpdateConfig = Schemas['SandboxNetworkUpdateConfig'];
export type SandboxForkRequest = Schemas['SandboxForkRequest'];
export type SandboxForkResult = Schemas['SandboxForkResult'];
export type SandboxSnapshotRequest = Schemas['SandboxSnapshotRequest'];
export type SnapshotInfo = Schemas['SnapshotInfo'];
export type Template = Schemas['Template'];
export type TemplateWithBuilds = Schemas['TemplateWithBuilds'];
export type TemplateBuild = Schemas['TemplateBuild'];
export type TemplateAliasResponse = Schemas['TemplateAliasResponse'];
export type AssignTemplateTagsRequest = Schemas['AssignTemplateTagsRequest'];
export type AssignedTemplateTags = Schemas['AssignedTemplateTags'];
export type DeleteTemplateTagsRequest = Schemas['DeleteTemplateTagsRequest'];
export type TemplateTag = Schemas['TemplateTag'];
export type TemplateBuildRequestV3 = Schemas['TemplateBuildRequestV3'];
export type TemplateRequestResponseV3 = Schemas['TemplateRequestResponseV3'];
export type TemplateBuildFileUpload = Schemas['TemplateBuildFileUpload'];
export type TemplateBuildStartV2 = Schemas['TemplateBuildStartV2'];
export type TemplateStep = Schemas['TemplateStep'];
export type FromImageRegistry = Schemas['FromImageRegistry'];
export type TemplateBuildStatus = Schemas['TemplateBuildStatus'];
export type TemplateBuildInfo = Schemas['TemplateBuildInfo'];
export type TemplateBuildLogsResponse = Schemas['TemplateBuildLogsResponse'];
export type BuildLogEntry = Schemas['BuildLogEntry'];
export type BuildStatusReason = Schemas['BuildStatusReason'];
export type LogsSource = Schemas['LogsSource'];
export type IdentifierMaskingDetails = Schemas['IdentifierMaskingDetails'];
export type TeamAPIKey = Schemas['TeamAPIKey'];
export type CreatedTeamAPIKey = Schemas['CreatedTeamAPIKey'];
export type NewTeamAPIKey = Schemas['NewTeamAPIKey'];
export type UpdateTeamAPIKey = Schemas['UpdateTeamAPIKey'];
